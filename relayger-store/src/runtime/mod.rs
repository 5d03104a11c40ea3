//! The persistent listener's runtime records: registration, configuration,
//! inspection and deletion. Claims, lease upkeep, finishes, notes and
//! reports live in the submodules.

pub(crate) mod activity;
pub(crate) mod claim;
pub(crate) mod finish;
pub(crate) mod granted;
pub(crate) mod lease;
pub(crate) mod notes;
#[cfg(test)]
mod plan_tests;
pub(crate) mod report;
pub(crate) mod scan;
pub(crate) mod statements;

use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::job::JobState;
use relayger_core::limits::MAX_RUNTIMES_PER_AGENT;
use relayger_core::policy::Policy;
use relayger_core::room_view::visible_allowed_rooms;
use relayger_core::wire::{JobCounts, Runtime, RuntimeBacklog, StartFrom, Timestamp};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::error::stored;
use crate::identities::IdentityRow;
use crate::pause::{PausePoint, pause};
use crate::prepared::CachedExt;
use crate::schema::{identities, jobs, runtime_checkpoints, runtime_log, runtimes};
use crate::{Caller, Store, StoreError};

#[derive(Debug, Clone, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = runtimes)]
pub(crate) struct RuntimeRow {
    pub(crate) id: Uuid,
    pub(crate) agent_id: Uuid,
    pub(crate) name: String,
    pub(crate) from_mode: String,
    pub(crate) policy: serde_json::Value,
    pub(crate) policy_fingerprint: String,
    pub(crate) config_version: i32,
    pub(crate) created_at: OffsetDateTime,
    pub(crate) updated_at: OffsetDateTime,
}

impl RuntimeRow {
    pub(crate) fn policy(&self) -> Result<Policy, StoreError> {
        serde_json::from_value(self.policy.clone()).map_err(|e| {
            StoreError::rejected(
                ErrorCode::Internal,
                format!("stored policy unreadable: {e}"),
            )
        })
    }

    fn from(&self) -> Result<StartFrom, StoreError> {
        StartFrom::parse(&self.from_mode)
            .ok_or_else(|| StoreError::corrupt("a runtime's start", &self.from_mode))
    }
}

/// Writes a log record in the caller's transaction.
pub(crate) async fn log(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    kind: &str,
    job: Option<(Uuid, Uuid)>,
    detail: serde_json::Value,
) -> Result<(), StoreError> {
    crate::metrics::runtime_event(kind, &detail, false);
    diesel::insert_into(runtime_log::table)
        .values((
            runtime_log::runtime_id.eq(runtime_id),
            runtime_log::kind.eq(kind),
            runtime_log::room_id.eq(job.map(|(room, _)| room)),
            runtime_log::message_id.eq(job.map(|(_, message)| message)),
            runtime_log::detail.eq(detail),
        ))
        .execute(conn)
        .await?;
    Ok(())
}

/// The runtime if it belongs to `agent_id`; anyone else gets "not found".
pub(crate) async fn owned_runtime(
    conn: &mut AsyncPgConnection,
    agent_id: Uuid,
    runtime_id: Uuid,
    lock: bool,
) -> Result<RuntimeRow, StoreError> {
    let query = runtimes::table
        .filter(runtimes::id.eq(runtime_id))
        .filter(runtimes::agent_id.eq(agent_id))
        .select(RuntimeRow::as_select());
    // NO KEY UPDATE, not UPDATE: it serialises claims and configures of the
    // runtime, yet lets a concurrent finish insert rows that reference the
    // runtime (their foreign keys take KEY SHARE), which FOR UPDATE would
    // block — a finish holding a room lock would then deadlock with a claim
    // scanning that room.
    let row = if lock {
        query.for_no_key_update().first(conn).await.optional()?
    } else {
        query.first(conn).await.optional()?
    };
    row.ok_or_else(|| StoreError::not_found("no such runtime"))
}

/// One row of [`JOB_COUNTS`].
#[derive(QueryableByName)]
struct JobCountRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    runtime_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Text)]
    state: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    jobs: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    active_leases: i64,
}

/// The jobs of the runtimes `$1` by state, and their active leases, of the
/// rooms `$2` only (none: every room).
const JOB_COUNTS: &str = "\
SELECT runtime_id, state, count(*) AS jobs,
       count(*) FILTER (WHERE state = 'claimed' AND lease_expires_at > now()) AS active_leases
FROM jobs
WHERE runtime_id = ANY ($1) AND ($2::uuid[] IS NULL OR room_id = ANY ($2))
GROUP BY runtime_id, state";

/// Jobs by state and active leases of each of `runtime_ids`, counting only
/// the rooms `rooms` (none: all): one statement for any number of runtimes.
async fn job_counts(
    conn: &mut AsyncPgConnection,
    runtime_ids: &[Uuid],
    rooms: Option<&[Uuid]>,
) -> Result<HashMap<Uuid, (JobCounts, u32)>, StoreError> {
    let rows: Vec<JobCountRow> = diesel::sql_query(JOB_COUNTS)
        .bind::<diesel::sql_types::Array<diesel::sql_types::Uuid>, _>(runtime_ids)
        .bind::<diesel::sql_types::Nullable<diesel::sql_types::Array<diesel::sql_types::Uuid>>, _>(
            rooms,
        )
        .cached()
        .load(conn)
        .await?;
    let mut by_runtime: HashMap<Uuid, (JobCounts, u32)> = HashMap::new();
    for row in rows {
        let (counts, active) = by_runtime.entry(row.runtime_id).or_default();
        let n: u64 = stored("a job count", row.jobs)?;
        match JobState::parse(&row.state) {
            Some(JobState::Pending) => counts.pending = n,
            Some(JobState::Claimed) => counts.claimed = n,
            Some(JobState::Handled) => counts.handled = n,
            Some(JobState::Skipped) => counts.skipped = n,
            Some(JobState::Dead) => counts.dead = n,
            None => return Err(StoreError::corrupt("a job state", row.state)),
        }
        let leases: u32 = stored("an active lease count", row.active_leases)?;
        *active += leases;
    }
    Ok(by_runtime)
}

/// The runtimes as a token restricted to `rooms` (none: unrestricted) sees
/// them: jobs and leases of its rooms only, and the policy's rooms cut to
/// its own ([`relayger_core::room_view`]). Two statements for any number.
async fn runtime_views(
    conn: &mut AsyncPgConnection,
    rows: &[RuntimeRow],
    rooms: Option<&[Uuid]>,
) -> Result<Vec<Runtime>, StoreError> {
    let agent_ids: Vec<Uuid> = rows.iter().map(|row| row.agent_id).collect();
    let agents: HashMap<Uuid, IdentityRow> = identities::table
        .filter(identities::id.eq_any(&agent_ids))
        .select(IdentityRow::as_select())
        .load(conn)
        .await?
        .into_iter()
        .map(|agent| (agent.id, agent))
        .collect();
    let ids: Vec<Uuid> = rows.iter().map(|row| row.id).collect();
    let mut counts = job_counts(conn, &ids, rooms).await?;
    rows.iter()
        .map(|row| {
            let agent = agents
                .get(&row.agent_id)
                .ok_or_else(|| StoreError::not_found("the runtime's agent"))?;
            let (jobs, active_leases) = counts.remove(&row.id).unwrap_or_default();
            let mut policy = row.policy()?;
            let (allowed_rooms, allowed_rooms_hidden) =
                visible_allowed_rooms(&policy.allowed_rooms, rooms);
            policy.allowed_rooms = allowed_rooms;
            Ok(Runtime {
                id: row.id,
                name: row.name.clone(),
                agent_number: agent.number(),
                from: row.from()?,
                policy,
                allowed_rooms_hidden,
                version: stored("a runtime version", row.config_version)?,
                created_at: Timestamp(row.created_at),
                updated_at: Timestamp(row.updated_at),
                jobs,
                active_leases,
                backlog: None,
            })
        })
        .collect()
}

/// One runtime as an unrestricted token sees it.
async fn runtime_view(
    conn: &mut AsyncPgConnection,
    row: &RuntimeRow,
) -> Result<Runtime, StoreError> {
    let mut views = runtime_views(conn, std::slice::from_ref(row), None).await?;
    Ok(views.pop().expect("one runtime in, one view out"))
}

#[derive(QueryableByName)]
struct Backlog {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    rooms: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    unscanned: i64,
}

/// The rooms the agent is in and their messages past the runtime's
/// checkpoints (a room without one is read from its first message).
async fn backlog(
    conn: &mut AsyncPgConnection,
    agent_id: Uuid,
    runtime_id: Uuid,
    rooms: Option<&[Uuid]>,
) -> Result<RuntimeBacklog, StoreError> {
    let row: Backlog = diesel::sql_query(
        "SELECT count(*)::bigint AS rooms,
                COALESCE(sum(GREATEST(r.last_seq - COALESCE(c.seq, 0), 0)), 0)::bigint AS unscanned
         FROM rooms r
         JOIN room_members m ON m.room_id = r.id
         LEFT JOIN runtime_checkpoints c ON c.runtime_id = $2 AND c.room_id = r.id
         WHERE m.identity_id = $1 AND m.left_at IS NULL
           AND ($3::uuid[] IS NULL OR r.id = ANY($3::uuid[]))",
    )
    .bind::<diesel::sql_types::Uuid, _>(agent_id)
    .bind::<diesel::sql_types::Uuid, _>(runtime_id)
    .bind::<diesel::sql_types::Nullable<diesel::sql_types::Array<diesel::sql_types::Uuid>>, _>(
        rooms,
    )
    .get_result(conn)
    .await?;
    Ok(RuntimeBacklog {
        rooms: stored("a room count", row.rooms)?,
        unscanned_messages: stored("a message count", row.unscanned)?,
    })
}

/// How many leases of the runtime are active now.
async fn active_leases(conn: &mut AsyncPgConnection, runtime_id: Uuid) -> Result<i64, StoreError> {
    Ok(jobs::table
        .filter(jobs::runtime_id.eq(runtime_id))
        .filter(jobs::state.eq(JobState::Claimed.as_str()))
        .filter(jobs::lease_expires_at.gt(diesel::dsl::now))
        .count()
        .get_result(conn)
        .await?)
}

/// Whether any lease of the runtime is active now.
pub(crate) async fn has_active_lease(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
) -> Result<bool, StoreError> {
    Ok(active_leases(conn, runtime_id).await? > 0)
}

#[derive(QueryableByName)]
struct MemberRoom {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    last_seq: i64,
}

/// The rooms the agent is in now, with their last seqs. Joins of the agent
/// wait for the registration (they lock the identity row it holds), so none
/// is missed. For `--from now` the rooms are also locked (in id order) and
/// their `members_version` bumped: a send in flight (it holds the room row)
/// commits first and its seq is read here, so its message is before the
/// checkpoint; a later send waits for the registration to commit, and a
/// one-statement send that waited sees the bumped version and retries on the
/// locked path, which sees the new runtime and marks the room for it.
async fn member_rooms(
    conn: &mut AsyncPgConnection,
    agent_id: Uuid,
    from: StartFrom,
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    let sql = match from {
        StartFrom::Now => {
            "WITH locked AS (
                 SELECT r.id FROM rooms r
                 JOIN room_members m ON m.room_id = r.id
                 WHERE m.identity_id = $1 AND m.left_at IS NULL
                 ORDER BY r.id
                 FOR NO KEY UPDATE OF r
             )
             UPDATE rooms SET members_version = rooms.members_version + 1
             FROM locked WHERE rooms.id = locked.id
             RETURNING rooms.id, rooms.last_seq"
        }
        // Every room is marked and scanned from its first message: a send
        // racing the registration cannot fall before a checkpoint.
        StartFrom::Beginning => {
            "SELECT r.id, r.last_seq FROM rooms r
             JOIN room_members m ON m.room_id = r.id
             WHERE m.identity_id = $1 AND m.left_at IS NULL"
        }
    };
    let rows: Vec<MemberRoom> = diesel::sql_query(sql)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.last_seq)).collect())
}

impl Store {
    /// Registers a runtime, or re-attaches to it when name, from and policy
    /// match the stored configuration. Returns the runtime and whether it was
    /// created now.
    pub async fn register_runtime(
        &self,
        agent: &IdentityRow,
        name: String,
        from: StartFrom,
        policy: Policy,
    ) -> Result<(Runtime, bool), StoreError> {
        let mut conn = self.conn().await?;
        let agent_id = agent.id;
        conn.transaction(async |conn| -> Result<_, StoreError> {
            // Serialises registrations of one agent (the limit of eight).
            identities::table
                .find(agent_id)
                .select(identities::id)
                .for_no_key_update()
                .first::<Uuid>(conn)
                .await?;
            let existing: Option<RuntimeRow> = runtimes::table
                .filter(runtimes::agent_id.eq(agent_id))
                .filter(runtimes::name.eq(&name))
                .select(RuntimeRow::as_select())
                .first(conn)
                .await
                .optional()?;
            let fingerprint = policy.fingerprint();
            if let Some(row) = existing {
                if row.from()? == from && row.policy_fingerprint == fingerprint {
                    let mut view = runtime_view(conn, &row).await?;
                    view.backlog = Some(backlog(conn, agent_id, row.id, None).await?);
                    return Ok((view, false));
                }
                return Err(StoreError::RejectedWithDetails {
                    code: ErrorCode::RuntimeConfigurationConflict,
                    message: format!(
                        "runtime `{name}` exists with another configuration (from {}, version {}); \
                         start it with the same --from and --policy, or change it with \
                         `runtimes configure` (refused only while a lease is active)",
                        row.from_mode, row.config_version
                    ),
                    details: json!({
                        "runtimeId": row.id,
                        "from": row.from_mode,
                        "policy": row.policy,
                        "version": row.config_version,
                    }),
                });
            }
            let count: i64 = runtimes::table
                .filter(runtimes::agent_id.eq(agent_id))
                .count()
                .get_result(conn)
                .await?;
            if count >= MAX_RUNTIMES_PER_AGENT {
                return Err(StoreError::rejected(
                    ErrorCode::RuntimeLimit,
                    format!(
                        "an agent has at most {MAX_RUNTIMES_PER_AGENT} runtimes; \
                         `runtimes delete ID` frees a name"
                    ),
                ));
            }
            let id = Uuid::now_v7();
            let row: RuntimeRow = diesel::insert_into(runtimes::table)
                .values((
                    runtimes::id.eq(id),
                    runtimes::agent_id.eq(agent_id),
                    runtimes::name.eq(&name),
                    runtimes::from_mode.eq(from.as_str()),
                    runtimes::policy.eq(policy.normalized()),
                    runtimes::policy_fingerprint.eq(&fingerprint),
                ))
                .returning(RuntimeRow::as_returning())
                .get_result(conn)
                .await?;
            let member_rooms = member_rooms(conn, agent_id, from).await?;
            pause(PausePoint::RegisterAfterRooms, agent_id).await;
            match from {
                // The committed seqs are the start: nothing before now.
                StartFrom::Now => {
                    let checkpoints: Vec<_> = member_rooms
                        .iter()
                        .map(|(room, seq)| {
                            (
                                runtime_checkpoints::runtime_id.eq(id),
                                runtime_checkpoints::room_id.eq(*room),
                                runtime_checkpoints::seq.eq(*seq),
                            )
                        })
                        .collect();
                    if !checkpoints.is_empty() {
                        diesel::insert_into(runtime_checkpoints::table)
                            .values(checkpoints)
                            .execute(conn)
                            .await?;
                    }
                }
                // Page through all accessible history.
                StartFrom::Beginning => {
                    let room_ids: Vec<Uuid> = member_rooms.iter().map(|(room, _)| *room).collect();
                    scan::mark_rooms_changed(conn, &[agent_id], &room_ids).await?;
                }
            }
            log(
                conn,
                id,
                "registered",
                None,
                json!({"name": name, "from": from.as_str()}),
            )
            .await?;
            let mut view = runtime_view(conn, &row).await?;
            view.backlog = Some(backlog(conn, agent_id, id, None).await?);
            Ok((view, true))
        })
        .await
    }

    /// The caller's runtimes (at most eight), oldest first, as its token
    /// may see them; three statements however many.
    pub async fn list_runtimes(&self, caller: &Caller) -> Result<Vec<Runtime>, StoreError> {
        let mut conn = self.conn().await?;
        let rows: Vec<RuntimeRow> = runtimes::table
            .filter(runtimes::agent_id.eq(caller.identity_id))
            .order(runtimes::created_at)
            .select(RuntimeRow::as_select())
            .load(&mut conn)
            .await?;
        runtime_views(&mut conn, &rows, caller.rooms.as_deref()).await
    }

    /// One of the caller's runtimes, as its token may see it.
    pub async fn runtime(&self, caller: &Caller, runtime_id: Uuid) -> Result<Runtime, StoreError> {
        let mut conn = self.conn().await?;
        let row = owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        let mut views = runtime_views(
            &mut conn,
            std::slice::from_ref(&row),
            caller.rooms.as_deref(),
        )
        .await?;
        Ok(views.pop().expect("one runtime in, one view out"))
    }

    /// The runtime as [`Store::runtime`] shows it to the caller, with the
    /// backlog a registration answers counted over the caller's rooms only:
    /// what a room-restricted worker attaching to the runtime will consider.
    pub async fn attached_runtime(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
    ) -> Result<Runtime, StoreError> {
        let mut view = self.runtime(caller, runtime_id).await?;
        let mut conn = self.conn().await?;
        view.backlog = Some(
            backlog(
                &mut conn,
                caller.identity_id,
                runtime_id,
                caller.rooms.as_deref(),
            )
            .await?,
        );
        Ok(view)
    }

    /// Deletes a runtime (freeing its name); refused while a lease is active.
    pub async fn delete_runtime(&self, agent_id: Uuid, runtime_id: Uuid) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        conn.transaction(async |conn| -> Result<_, StoreError> {
            owned_runtime(conn, agent_id, runtime_id, true).await?;
            if has_active_lease(conn, runtime_id).await? {
                return Err(StoreError::rejected(
                    ErrorCode::RuntimeBusy,
                    "a lease is active: stop the worker first",
                ));
            }
            diesel::delete(runtimes::table.find(runtime_id))
                .execute(conn)
                .await?;
            Ok(())
        })
        .await
    }

    /// Replaces the policy. `version` must be the current configuration
    /// version; any valid lease refuses (stop the worker first); expired
    /// owners are fenced. Pending jobs stay and meet the new policy at
    /// claim; handled and skipped jobs are not replayed; the hourly budget
    /// is not reset.
    pub async fn configure_runtime(
        &self,
        agent_id: Uuid,
        runtime_id: Uuid,
        version: u32,
        policy: Policy,
    ) -> Result<Runtime, StoreError> {
        let mut conn = self.conn().await?;
        let (runtime, askers) = crate::metrics::count_when_committed(conn.transaction(async |conn| -> Result<_, StoreError> {
            let row = owned_runtime(conn, agent_id, runtime_id, true).await?;
            if i64::from(version) != i64::from(row.config_version) {
                return Err(StoreError::rejected(
                    ErrorCode::VersionConflict,
                    format!(
                        "configuration version {version} is not current (it is {}); inspect the runtime and retry",
                        row.config_version
                    ),
                ));
            }
            if has_active_lease(conn, runtime_id).await? {
                return Err(StoreError::rejected(
                    ErrorCode::RuntimeBusy,
                    "a lease is active: stop the worker before configuring",
                ));
            }
            let old_policy = row.policy()?;
            let askers =
                claim::expiry::expire_leases(conn, runtime_id, agent_id, &old_policy).await?;
            let updated: RuntimeRow = diesel::update(runtimes::table.find(runtime_id))
                .set((
                    runtimes::policy.eq(policy.normalized()),
                    runtimes::policy_fingerprint.eq(policy.fingerprint()),
                    runtimes::config_version.eq(row.config_version + 1),
                    runtimes::updated_at.eq(diesel::dsl::now),
                ))
                .returning(RuntimeRow::as_returning())
                .get_result(conn)
                .await?;
            log(conn, runtime_id, "configured", None, json!({"version": updated.config_version})).await?;
            Ok((runtime_view(conn, &updated).await?, askers))
        }))
        .await?;
        // The leases it ended: their questions are queued again or failed.
        self.publish_wakes(crate::wake::Wakes::askers(askers));
        Ok(runtime)
    }
}
