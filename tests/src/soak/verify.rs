//! The verdict, read from the database after the run: one reply per
//! question or a dead letter, no duplicates, every reply committed by the
//! live lease, and stats that add up with the attempts and the workers'
//! NDJSON.

use std::collections::{HashMap, HashSet};

use relayger_core::wire::RuntimeStats;
use uuid::Uuid;

use super::rows::{AttemptRow, Rows};
use super::workers::WorkerRecord;

/// How far apart (ms) a grant and a kill may be for the kill to explain an
/// attempt no process printed: the claim response is in flight that long
/// at most on a loaded machine.
const KILL_SLACK_MS: i64 = 2000;

/// How many example problems are kept for the printout.
const MAX_EXAMPLES: usize = 12;

/// A time the server or PostgreSQL was down, by the wall clock (ms since
/// the Unix epoch).
#[derive(Debug, Clone)]
pub(crate) struct Outage {
    pub(crate) what: &'static str,
    pub(crate) start_ms: i64,
    pub(crate) end_ms: i64,
    /// The worker generations it concerned (`None`: all of them). An
    /// unfinished attempt is explained by it when one of these claimed it
    /// (or no process printed the claim) within its time.
    pub(crate) generations: Option<Vec<usize>>,
}

impl std::fmt::Display for Outage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let down = self.end_ms - self.start_ms;
        write!(f, "{} (down {down} ms)", self.what)
    }
}

#[derive(Debug)]
pub(crate) struct Context<'a> {
    pub(crate) runtime_id: Uuid,
    pub(crate) agent_id: Uuid,
    pub(crate) record: &'a WorkerRecord,
    /// (generation, wall-clock ms) of every SIGKILL.
    pub(crate) killed: &'a [(usize, i64)],
    /// (generation, wall-clock ms, exit code) of every mid-run SIGINT.
    pub(crate) interrupted: &'a [(usize, i64, Option<i32>)],
    pub(crate) outages: &'a [Outage],
    pub(crate) lease_ms: u64,
    pub(crate) stats: Option<&'a RuntimeStats>,
}

#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub(crate) handled: u64,
    pub(crate) dead_lettered: u64,
    pub(crate) lost: u64,
    pub(crate) duplicate_replies: u64,
    /// Replies whose sender, runtime or text is not what the handler sent.
    pub(crate) wrong_replies: u64,
    pub(crate) stale_finishes: u64,
    pub(crate) attempts: u64,
    pub(crate) unfinished: u64,
    pub(crate) unfinished_killed: u64,
    pub(crate) unfinished_outage: u64,
    pub(crate) released: u64,
    /// Unfinished, unreleased attempts an interrupt explains: spent.
    pub(crate) burnt_by_interrupt: u64,
    pub(crate) unexplained_unfinished: u64,
    /// Stats that do not add up, in words.
    pub(crate) stats_mismatches: Vec<String>,
    pub(crate) examples: Vec<String>,
}

impl Verdict {
    fn example(&mut self, text: String) {
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(text);
        }
    }
}

pub(crate) fn judge(rows: &Rows, cx: &Context<'_>, asked: usize) -> Verdict {
    let mut verdict = Verdict::default();
    let mut replies_to: HashMap<Uuid, Vec<usize>> = HashMap::new();
    for (index, reply) in rows.replies.iter().enumerate() {
        replies_to.entry(reply.reply_to).or_default().push(index);
    }
    let found = rows.questions.len();
    if found != asked {
        verdict.lost += u64::try_from(asked.saturating_sub(found)).unwrap_or(0);
        verdict.example(format!("{asked} questions sent, {found} in the database"));
    }

    for question in &rows.questions {
        let replies = replies_to
            .get(&question.message_id)
            .map_or(&[][..], Vec::as_slice);
        for &index in replies {
            let reply = &rows.replies[index];
            let right = reply.sender_id == cx.agent_id
                && reply.runtime_id == Some(cx.runtime_id)
                && reply.text == question.text;
            if !right {
                verdict.wrong_replies += 1;
                verdict.example(format!(
                    "reply {} to {} is not the handler's: {reply:?}",
                    reply.id, question.message_id
                ));
            }
        }
        let extra = replies.len().saturating_sub(1);
        verdict.duplicate_replies += u64::try_from(extra).unwrap_or(0);
        if extra > 0 {
            verdict.example(format!(
                "{} replies to {}",
                replies.len(),
                question.message_id
            ));
        }
        match (question.state.as_deref(), replies.len()) {
            (Some("handled"), 1..) => verdict.handled += 1,
            (Some("dead"), 0) if question.reason.is_some() => verdict.dead_lettered += 1,
            (state, count) => {
                verdict.lost += 1;
                verdict.example(format!(
                    "question {} ends as {state:?} ({:?}) with {count} replies",
                    question.message_id, question.reason
                ));
            }
        }
    }

    check_fencing(rows, cx, &mut verdict);
    account_attempts(rows, cx, &mut verdict);
    verdict
}

/// Every reply must have been committed by the lease that was live: its
/// completion names the attempt, that attempt is the job's newest lease,
/// the runtime log shows no expiry between its claim and its reply, and
/// the process that printed `replied` is the one that printed the claim.
fn check_fencing(rows: &Rows, cx: &Context<'_>, verdict: &mut Verdict) {
    let completion_of: HashMap<Uuid, (i64, Option<Uuid>)> = rows
        .completions
        .iter()
        .map(|c| (c.job_id, (c.lease_version, c.reply_message_id)))
        .collect();
    let attempt_by_version: HashMap<i64, &AttemptRow> =
        rows.attempts.iter().map(|a| (a.lease_version, a)).collect();
    let mut newest: HashMap<Uuid, i64> = HashMap::new();
    for attempt in &rows.attempts {
        let entry = newest
            .entry(attempt.job_id)
            .or_insert(attempt.lease_version);
        *entry = (*entry).max(attempt.lease_version);
    }
    let job_of_question: HashMap<Uuid, (Uuid, &str)> = rows
        .questions
        .iter()
        .filter_map(|q| Some((q.message_id, (q.job_id?, q.job_key.as_deref()?))))
        .collect();
    let live_at_reply = replay_log(rows);

    let mut committed: HashMap<&str, &AttemptRow> = HashMap::new();
    let mut stale: HashSet<Uuid> = HashSet::new();
    for reply in &rows.replies {
        let Some(&(job_id, job_key)) = job_of_question.get(&reply.reply_to) else {
            stale.insert(reply.id);
            continue;
        };
        let problem = match completion_of.get(&job_id) {
            None => Some("no completion".to_owned()),
            Some((_, reply_id)) if *reply_id != Some(reply.id) => {
                Some(format!("the completion names reply {reply_id:?}"))
            }
            Some((version, _)) => match attempt_by_version.get(version) {
                None => Some(format!("no attempt with lease version {version}")),
                Some(attempt) => {
                    committed.insert(job_key, attempt);
                    lease_problem(attempt, newest.get(&job_id), live_at_reply.get(job_key))
                }
            },
        };
        if let Some(problem) = problem {
            stale.insert(reply.id);
            verdict.example(format!(
                "stale finish: reply {} to {}: {problem}",
                reply.id, reply.reply_to
            ));
        }
    }
    // The workers' side: whoever printed `replied` printed the claim of
    // the committing attempt.
    for (generation, job_key, reply_id) in &cx.record.replies {
        let Some(attempt) = committed.get(job_key.as_str()) else {
            verdict.stale_finishes += 1;
            verdict.example(format!(
                "worker {generation} replied to {job_key}, which has no committed reply"
            ));
            continue;
        };
        let attempt_number = u64::try_from(attempt.attempt).unwrap_or(0);
        let claimers = cx.record.claims.get(&(job_key.clone(), attempt_number));
        let claimed_it = claimers.is_some_and(|c| c.contains(generation));
        let same_reply = reply_id.as_deref().and_then(|r| r.parse::<Uuid>().ok())
            == completion_of.get(&attempt.job_id).and_then(|c| c.1);
        if !claimed_it || !same_reply {
            verdict.stale_finishes += 1;
            verdict.example(format!(
                "worker {generation} printed replied for {job_key} attempt {attempt_number} \
                 (claimed by {claimers:?}, reply {reply_id:?})"
            ));
        }
    }
    verdict.stale_finishes += u64::try_from(stale.len()).unwrap_or(0);
}

/// What the runtime log says about the lease a reply was written under:
/// job key → (lease version, attempt) live when the `replied` record was
/// written, or `None` when no lease was live then.
fn replay_log(rows: &Rows) -> HashMap<&str, Option<(i64, i32)>> {
    let mut live: HashMap<&str, Option<(i64, i32)>> = HashMap::new();
    let mut at_reply: HashMap<&str, Option<(i64, i32)>> = HashMap::new();
    for record in &rows.log {
        let key = record.job_key.as_str();
        match record.kind.as_str() {
            "claimed" => {
                let version = record
                    .version
                    .as_deref()
                    .and_then(|v| v.parse::<i64>().ok());
                let lease = version.zip(record.attempt);
                live.insert(key, lease);
            }
            "replied" => {
                let lease = live.get(key).copied().flatten();
                // A second `replied` for one job would be a second completion.
                at_reply
                    .entry(key)
                    .and_modify(|seen| *seen = None)
                    .or_insert(lease);
            }
            "expired" | "dead_letter" | "failed" | "released" => {
                live.insert(key, None);
            }
            _ => {}
        }
    }
    at_reply
}

fn lease_problem(
    attempt: &AttemptRow,
    newest: Option<&i64>,
    live_at_reply: Option<&Option<(i64, i32)>>,
) -> Option<String> {
    if attempt.ended.as_deref() != Some("finished") || attempt.outcome.as_deref() != Some("replied")
    {
        return Some(format!(
            "attempt {} (owner {}) ended {:?} with {:?}",
            attempt.attempt, attempt.lease_owner, attempt.ended, attempt.outcome
        ));
    }
    if newest != Some(&attempt.lease_version) {
        return Some(format!(
            "committed under version {}, but version {newest:?} was granted later",
            attempt.lease_version
        ));
    }
    match live_at_reply {
        Some(Some((version, number)))
            if *version == attempt.lease_version && *number == attempt.attempt =>
        {
            None
        }
        other => Some(format!(
            "the log shows lease {other:?} live at the reply, not version {} attempt {}",
            attempt.lease_version, attempt.attempt
        )),
    }
}

/// Unfinished attempts must each have a cause the soak created: the
/// claiming process was SIGKILLed, or the attempt was in flight at a
/// server or PostgreSQL outage. And the stats must add up.
fn account_attempts(rows: &Rows, cx: &Context<'_>, verdict: &mut Verdict) {
    let killed: HashSet<usize> = cx
        .killed
        .iter()
        .map(|(generation, _)| *generation)
        .collect();
    let lease = i64::try_from(cx.lease_ms).unwrap_or(i64::MAX);
    verdict.attempts = u64::try_from(rows.attempts.len()).unwrap_or(0);
    for attempt in rows.attempts.iter().filter(|a| !a.finished) {
        verdict.unfinished += 1;
        let number = u64::try_from(attempt.attempt).unwrap_or(0);
        let claimers = cx.record.claims.get(&(attempt.job_key.clone(), number));
        // A process killed between the claim's commit and printing it
        // leaves no `claimed` line: then a kill right after the grant is
        // the cause.
        let by_killed = match claimers {
            Some(claimers) => claimers.iter().any(|g| killed.contains(g)),
            None => cx.killed.iter().any(|(_, at)| {
                (attempt.claimed_ms - KILL_SLACK_MS..=attempt.claimed_ms + KILL_SLACK_MS)
                    .contains(at)
            }),
        };
        let by_interrupted = match claimers {
            Some(claimers) => claimers
                .iter()
                .any(|g| cx.interrupted.iter().any(|(i, _, _)| i == g)),
            None => cx.interrupted.iter().any(|(_, at, _)| {
                (attempt.claimed_ms - KILL_SLACK_MS..=attempt.claimed_ms + KILL_SLACK_MS)
                    .contains(at)
            }),
        };
        let in_outage = cx.outages.iter().any(|o| {
            let concerned = match (&o.generations, claimers) {
                (Some(generations), Some(claimers)) => {
                    claimers.iter().any(|g| generations.contains(g))
                }
                _ => true,
            };
            concerned
                && attempt.claimed_ms >= o.start_ms - lease - 1000
                && attempt.claimed_ms <= o.end_ms + lease
        });
        if attempt.ended.as_deref() == Some("released") {
            verdict.released += 1;
        } else if by_killed {
            verdict.unfinished_killed += 1;
        } else if in_outage {
            verdict.unfinished_outage += 1;
        } else if by_interrupted {
            verdict.burnt_by_interrupt += 1;
            verdict.example(format!(
                "attempt {} of {} (ended {:?}) by {claimers:?} was neither finished nor \
                 released after an interrupt",
                attempt.attempt, attempt.job_key, attempt.ended
            ));
        } else {
            verdict.unexplained_unfinished += 1;
            verdict.example(format!(
                "unfinished attempt {} of {} (ended {:?}, claimed at {} ms) by {claimers:?}: \
                 no kill or outage explains it",
                attempt.attempt, attempt.job_key, attempt.ended, attempt.claimed_ms
            ));
        }
    }

    let mut mismatch = |what: String| verdict.stats_mismatches.push(what);
    let claimed_records =
        u64::try_from(rows.log.iter().filter(|r| r.kind == "claimed").count()).unwrap_or(0);
    if claimed_records != verdict.attempts {
        mismatch(format!(
            "{claimed_records} claimed log records, {} attempt rows",
            verdict.attempts
        ));
    }
    if cx.record.claimed_events > verdict.attempts {
        mismatch(format!(
            "the workers printed {} claims, the database has {} attempts",
            cx.record.claimed_events, verdict.attempts
        ));
    }
    let counted: i64 = rows
        .questions
        .iter()
        .filter_map(|q| q.attempts)
        .map(i64::from)
        .sum();
    let expected = i64::try_from(verdict.attempts - verdict.released).unwrap_or(i64::MAX);
    if counted != expected {
        mismatch(format!(
            "jobs count {counted} attempts, attempts rows minus releases are {expected}"
        ));
    }
    let Some(stats) = cx.stats else {
        mismatch("no stats".to_owned());
        return;
    };
    let checks = [
        ("claims", stats.claims, verdict.attempts),
        ("attempts", stats.attempts, verdict.attempts),
        (
            "unfinishedAttempts",
            stats.unfinished_attempts,
            verdict.unfinished,
        ),
        (
            "finishedAttempts",
            stats.finished_attempts,
            verdict.attempts - verdict.unfinished,
        ),
        ("jobs.handled", stats.jobs.handled, verdict.handled),
        ("jobs.dead", stats.jobs.dead, verdict.dead_lettered),
        (
            "jobs.pending + claimed + skipped",
            stats.jobs.pending + stats.jobs.claimed + stats.jobs.skipped,
            0,
        ),
    ];
    for (name, reported, counted) in checks {
        if reported != counted {
            mismatch(format!("stats {name} = {reported}, counted {counted}"));
        }
    }
}

/// For every job that a cut-off worker held when its link went down
/// (claimed by one of `generations` before `cut_ms`, not ended by then and
/// never finished by that attempt), the time from the cut to the next attempt's grant: the takeover.
/// `None` for a held job no other attempt followed.
pub(crate) fn takeovers(
    rows: &Rows,
    cx: &Context<'_>,
    generations: &[usize],
    cut_ms: i64,
) -> Vec<Option<i64>> {
    let mut times = Vec::new();
    for attempt in &rows.attempts {
        let number = u64::try_from(attempt.attempt).unwrap_or(0);
        let held_by_cut = cx
            .record
            .claims
            .get(&(attempt.job_key.clone(), number))
            .is_some_and(|claimers| claimers.iter().any(|g| generations.contains(g)));
        // Finished attempts were not taken over (the owner finished in time).
        let in_flight = !attempt.finished
            && attempt.claimed_ms < cut_ms
            && attempt.ended_ms.is_none_or(|ended| ended > cut_ms);
        if !held_by_cut || !in_flight {
            continue;
        }
        let next = rows
            .attempts
            .iter()
            .filter(|a| a.job_id == attempt.job_id && a.attempt > attempt.attempt)
            .map(|a| a.claimed_ms)
            .min();
        times.push(next.map(|claimed| claimed - cut_ms));
    }
    times
}
