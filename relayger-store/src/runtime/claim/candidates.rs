//! A claim's candidates: pending jobs oldest first, round by round
//! ([`CANDIDATES`]), and judged under the current policy
//! (`Policy::judge`); the numbers — how many it wants, each round's size,
//! the spread over rooms, the candidate budget — are the claim's
//! [`ClaimPlan`].

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::claim_plan::{
    CANDIDATE_BUDGET, ClaimPlan, ROUND_MARGIN, RoomSpread, next_round_size,
};
use relayger_core::policy::{JobFacts, MessageFacts, Policy, SkipReason};
use relayger_core::wire::MessageEnvelope;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::messages::MessageWithSender;
use crate::prepared::CachedExt;
use crate::runtime::statements::CANDIDATES;
use crate::{Caller, StoreError};

/// Wall-clock time one claim may spend judging candidates.
const CLAIM_TIME_BUDGET: std::time::Duration = std::time::Duration::from_millis(250);

/// A pending job with its message and what the policy needs.
#[derive(QueryableByName)]
pub(super) struct CandidateRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    pub(super) job_id: Uuid,
    #[diesel(sql_type = Timestamptz)]
    job_created_at: OffsetDateTime,
    #[diesel(sql_type = Bool)]
    canceled: bool,
    #[diesel(sql_type = Bool)]
    member: bool,
    #[diesel(sql_type = Bool)]
    sender_blocked: bool,
    #[diesel(embed)]
    message: MessageWithSender,
}

impl CandidateRow {
    /// The sender of the job's message.
    pub(super) fn sender_id(&self) -> Uuid {
        self.message.sender_id()
    }
}

/// The first round, sent in the claim's first flight before the policy is
/// known: `size` rows at most (`claim_plan::first_round_size`), and the
/// statement itself keeps to `claim_plan::first_round_limit` of the free
/// lease slots, so a runtime at its cap reads no job. Pipelines like
/// [`super::expiry::expired_leases`].
pub(super) fn first_round<'a>(
    conn: &'a AsyncPgConnection,
    runtime_id: Uuid,
    caller: &Caller,
    size: u32,
) -> impl std::future::Future<Output = QueryResult<Vec<CandidateRow>>> + Send + 'a {
    round(conn, runtime_id, caller, None, size, Some(ROUND_MARGIN))
}

/// One round of [`CANDIDATES`] after `after`: at most `size` rows, and in
/// the first round (`first_round_margin` given) at most that many more than
/// the free lease slots.
fn round<'a>(
    mut conn: &'a AsyncPgConnection,
    runtime_id: Uuid,
    caller: &Caller,
    after: Option<(OffsetDateTime, Uuid)>,
    size: u32,
    first_round_margin: Option<u32>,
) -> impl std::future::Future<Output = QueryResult<Vec<CandidateRow>>> + Send + 'a {
    diesel::sql_query(CANDIDATES)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<diesel::sql_types::Uuid, _>(caller.identity_id)
        .bind::<Nullable<Array<diesel::sql_types::Uuid>>, _>(caller.rooms.clone())
        .bind::<Nullable<Timestamptz>, _>(after.map(|(at, _)| at))
        .bind::<Nullable<diesel::sql_types::Uuid>, _>(after.map(|(_, id)| id))
        .bind::<BigInt, _>(i64::from(size))
        .bind::<Nullable<BigInt>, _>(first_round_margin.map(i64::from))
        .cached()
        .load(&mut conn)
}

/// The candidates a claim judged.
pub(super) struct Judged {
    /// To grant, oldest first, each with its message.
    pub(super) grants: Vec<(CandidateRow, MessageEnvelope)>,
    /// Refused by the policy.
    pub(super) skips: Vec<(CandidateRow, SkipReason)>,
    /// Pending jobs may remain that this claim did not grant or refuse (the
    /// budget ran out, `want` was met, the last round was full, or the
    /// per-room spread passed some over).
    pub(super) unexamined_left: bool,
}

/// What every candidate round of one claim shares.
#[derive(Clone, Copy)]
pub(super) struct Round<'a> {
    pub(super) runtime_id: Uuid,
    pub(super) caller: &'a Caller,
    pub(super) policy: &'a Policy,
    pub(super) now: OffsetDateTime,
    pub(super) plan: &'a ClaimPlan,
}

/// Locks pending jobs oldest first in growing rounds — the `first` read
/// in the claim's first flight, or none when it no longer counts — and
/// judges them under the current policy (`Policy::judge`): refusals become
/// skips, the rest are granted until the plan's `want` is met, within the
/// plan's spread over rooms. Keeps going past refusals until the candidate
/// or time budget is spent, so a run of skips never leaves a real question
/// for a later claim.
pub(super) async fn judge_candidates(
    conn: &mut AsyncPgConnection,
    mut first: Option<Vec<CandidateRow>>,
    round_of: Round<'_>,
) -> Result<Judged, StoreError> {
    let mut judged = Judged {
        grants: Vec::new(),
        skips: Vec::new(),
        unexamined_left: false,
    };
    let plan = round_of.plan;
    let want = plan.want();
    if want == 0 {
        // The first round's rows stay pending.
        return Ok(judged);
    }
    let started = std::time::Instant::now();
    let agent_id = round_of.caller.identity_id;
    let mut spread = RoomSpread::default();
    let mut granted: u32 = 0;
    let mut after: Option<(OffsetDateTime, Uuid)> = None;
    let mut examined: usize = 0;
    // Every candidate of a round is read with its message, so a round
    // takes only a few more than wanted: a run of refusals or full rooms
    // goes on to a larger round.
    let mut size = plan.round_size();
    loop {
        let (rows, full) = match first.take() {
            Some(rows) => {
                let limit = plan.first_round_limit();
                size = size.max(limit);
                let full = at_least(rows.len(), limit);
                (rows, full)
            }
            None => {
                if examined >= CANDIDATE_BUDGET || started.elapsed() >= CLAIM_TIME_BUDGET {
                    judged.unexamined_left = true;
                    return Ok(judged);
                }
                let rows = round(
                    conn,
                    round_of.runtime_id,
                    round_of.caller,
                    after,
                    size,
                    None,
                )
                .await?;
                let full = at_least(rows.len(), size);
                (rows, full)
            }
        };
        examined = examined.saturating_add(rows.len());
        let mut rows = rows.into_iter();
        for row in rows.by_ref() {
            after = Some((row.job_created_at, row.job_id));
            let message = row.message.clone().envelope();
            let facts = JobFacts {
                canceled: row.canceled,
                member: row.member,
                sender_blocked: row.sender_blocked,
                room_id: message.conversation_id,
                sender: Some(message.sender.number.clone()),
                message: MessageFacts {
                    from_self: message.sender.id == agent_id,
                    ask: message.ask,
                    by_runtime: message.by_runtime,
                },
                deadline: message.deadline.map(|deadline| deadline.0),
            };
            if let Err(reason) = round_of.policy.judge(&facts, round_of.now) {
                judged.skips.push((row, reason));
                continue;
            }
            if !spread.admit(message.conversation_id) {
                // Left pending.
                judged.unexamined_left = true;
                continue;
            }
            judged.grants.push((row, message));
            granted += 1;
            if granted >= want {
                break;
            }
        }
        if granted >= want {
            // `want` was met: candidates of this round left over, or a full
            // round, mean more may wait.
            judged.unexamined_left |= rows.next().is_some() || full;
            return Ok(judged);
        }
        if !full {
            return Ok(judged);
        }
        size = next_round_size(size);
    }
}

/// Whether a round that took `taken` rows took at least `limit`.
fn at_least(taken: usize, limit: u32) -> bool {
    u32::try_from(taken).map_or(true, |taken| taken >= limit)
}
