//! The statements of the finish path and the rows they return.

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Jsonb, Nullable, Text, Uuid as SqlUuid};
use uuid::Uuid;

use crate::messages::{dirty_marks_cte, room_append_ctes};

/// The fence's lock: this job of this runtime of the agent, claimed (`$6`)
/// by this owner under this version, in a room the agent is still a member
/// of (and the token may see, `$7`), and whatever `$and` adds. The job row
/// is locked first and its expiry judged after that (in [`fence_update`]),
/// by the clock of that moment: a finish that waited for the lock past the
/// lease is refused.
macro_rules! fence_lock {
    ($and:literal) => {
        concat!(
            "SELECT j.id, j.lease_expires_at FROM jobs j
    JOIN runtimes rt ON rt.id = j.runtime_id AND rt.agent_id = $3
    WHERE j.id = $1 AND j.runtime_id = $2
      AND j.state = $6 AND j.lease_owner = $4 AND j.lease_version = $5
      AND ($7::uuid[] IS NULL OR j.room_id = ANY($7))
      AND EXISTS (SELECT 1 FROM room_members m
                  WHERE m.room_id = j.room_id AND m.identity_id = $3 AND m.left_at IS NULL)",
            $and,
            "
    FOR NO KEY UPDATE OF j"
        )
    };
}

/// The fenced update of the job [`fence_lock`] locked as `locked`, if its
/// lease is still unexpired, setting `$set`; `completed` sets a completed
/// job's state (`$8`) and reason (`$9`) and clears its lease.
macro_rules! fence_update {
    (completed) => {
        fence_update!(
            "state = $8, reason = $9, lease_owner = NULL, lease_version = NULL, \
             lease_expires_at = NULL, updated_at = now()"
        )
    };
    ($set:literal) => {
        concat!(
            "UPDATE jobs j SET ",
            $set,
            "
FROM locked l, runtimes rt
WHERE j.id = l.id AND l.lease_expires_at > clock_timestamp() AND rt.id = j.runtime_id
RETURNING j.job_key, j.room_id, j.message_id, j.attempts, rt.policy"
        )
    };
}

/// The attempt's end (its `WHERE` follows): its outcome, error, reported
/// usage, and the fingerprint and answer an error finish keeps for a retry
/// (the parameters, or `NULL`, that hold them).
macro_rules! end_attempt {
    ($outcome:literal, $error:literal, $calls:literal, $input:literal, $output:literal,
     $fingerprint:literal, $response:literal) => {
        concat!(
            "UPDATE attempts SET finished_at = now(), outcome = ",
            $outcome,
            ", ended = 'finished', error = ",
            $error,
            ",
        model_calls = ",
            $calls,
            ", input_tokens = ",
            $input,
            ", output_tokens = ",
            $output,
            ",
        fingerprint = ",
            $fingerprint,
            ", finish_response = ",
            $response
        )
    };
}

/// A reply appended to room `$room` from the agent `$agent` (message id
/// `$id`, text `$text`, answering `$reply_to`, by runtime `$runtime`), after
/// a `room` CTE: the append CTEs, the message and the dirty marks, then the
/// start of the completion's insert (its `SELECT` follows).
macro_rules! reply_ctes {
    ($room:literal, $agent:literal, $id:literal, $text:literal, $reply_to:literal,
     $runtime:literal) => {
        concat!(
            room_append_ctes!($room, $agent),
            "    INSERT INTO messages (id, room_id, seq, sender_id, text, ask, reply_to, by_runtime, runtime_id)
    SELECT ",
            $id,
            ", b.id, b.last_seq, ",
            $agent,
            ", ",
            $text,
            ", false, ",
            $reply_to,
            ", true, ",
            $runtime,
            " FROM bumped b
    RETURNING id, room_id
",
            dirty_marks_cte!(),
            "), completed AS (
    INSERT INTO completions (job_id, fingerprint, lease_version, reply_message_id, reply_room_id, outcome)
"
        )
    };
}

/// The fence and the job's end in one statement (a completed job: state
/// `$8`, reason `$9`, lease cleared).
pub(super) const FENCE_COMPLETE: &str = concat!(
    "WITH locked AS (",
    fence_lock!(""),
    ")\n",
    fence_update!(completed)
);

/// The fence for a failed attempt: it only locks the job (`$8` is `claimed`,
/// `$9` null); the retry or dead letter is then written by `fail_job`.
pub(super) const FENCE_FAIL: &str = concat!(
    "WITH locked AS (",
    fence_lock!(""),
    ")\n",
    fence_update!("state = $8, reason = coalesce($9, j.reason), updated_at = now()")
);

/// A whole finish of one job that completes (a reply, a skip or neither;
/// not an error) in one statement, for a job whose room (`$10`), message
/// (`$11`) and job key (`$21`) this instance knows from its claim: the
/// fence ([`FENCE_COMPLETE`]'s, which also checks those three), the
/// attempt's end (`$12` outcome, `$13`–`$15` usage), the log record (`$16`
/// kind), the reply (`$17` its id, `$18` its text; both null without one)
/// under the room lock taken last, and the completion (`$19` fingerprint,
/// `$20` the finish's answer). Everything after the fence reads the
/// fence's `RETURNING`, so a fence that matches nothing writes nothing and
/// answers `fenced = false` (the caller then finishes that job the long
/// way, which diagnoses it). A reply whose room's members changed while it
/// waited for the lock raises [`MEMBERS_CHANGED`], as [`INSERT_REPLY`]
/// does.
pub(super) const FINISH_IN_ONE: &str = concat!(
    "WITH locked AS (",
    fence_lock!("\n      AND j.room_id = $10 AND j.message_id = $11 AND j.job_key = $21"),
    "), fenced AS (\n",
    fence_update!(completed),
    "
), attempt AS (
",
    end_attempt!("$12", "NULL", "$13", "$14", "$15", "NULL", "NULL"),
    "
    WHERE lease_version = $5 AND EXISTS (SELECT 1 FROM fenced)
), logged AS (
    INSERT INTO runtime_log (runtime_id, kind, job_key, room_id, message_id, detail)
    SELECT $2, $16, f.job_key, f.room_id, f.message_id,
           jsonb_build_object('attempt', f.attempts, 'replyMessageId', $17::uuid, 'skip', $9::text)
    FROM fenced f
), room AS (
    SELECT r.id, r.members_version FROM rooms r
    WHERE r.id = $10 AND $17::uuid IS NOT NULL AND EXISTS (SELECT 1 FROM fenced)
",
    reply_ctes!("$10", "$3", "$17", "$18", "$11", "$2"),
    "    SELECT $1, $19, $5, i.id, i.room_id, $20 FROM fenced f LEFT JOIN inserted i ON true
)
SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
       CASE WHEN $17::uuid IS NULL OR NOT EXISTS (SELECT 1 FROM fenced) THEN '{}'::uuid[]
            WHEN EXISTS (SELECT 1 FROM inserted) THEN ARRAY(SELECT identity_id FROM others)
            ELSE relayger_members_changed() END AS wake"
);

/// The attempt's end, the log record and (`$5`: without a reply) the
/// completion.
pub(super) const RECORD_END: &str = concat!(
    "WITH completed AS (
    INSERT INTO completions (job_id, fingerprint, lease_version, outcome)
    SELECT $1, $3, $2, $4 WHERE $5
), attempt AS (
    ",
    end_attempt!("$6", "$7", "$8", "$9", "$10", "$11", "$12"),
    "
    WHERE lease_version = $2
)
INSERT INTO runtime_log (runtime_id, kind, job_key, room_id, message_id, detail)
VALUES ($13, $14, $15, $16, $17, $18)"
);

/// The reply: bumps `last_seq` (the room lock, held from here to the
/// commit), inserts the message, the completion naming it and the other
/// members' runtimes' dirty marks, and returns whom to wake. As in the
/// one-statement send, it writes nothing when the room's `members_version`
/// moved while it waited for the lock (its snapshot of the members would be
/// stale); it then raises [`MEMBERS_CHANGED`], so the transaction fails
/// whole even with its `COMMIT` already sent behind it, and the caller runs
/// the finish again with the room locked first ([`LOCK_ROOM`]).
pub(super) const INSERT_REPLY: &str = concat!(
    "WITH room AS (
    SELECT r.id, r.members_version FROM rooms r WHERE r.id = $1
",
    reply_ctes!("$1", "$2", "$3", "$4", "$5", "$6"),
    "    SELECT $7, $8, $9, i.id, i.room_id, $10 FROM inserted i
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM inserted) THEN ARRAY(SELECT identity_id FROM others)
            ELSE relayger_members_changed() END AS wake"
);

/// The constraint name of the error `relayger_members_changed()` raises
/// (a migration defines it).
pub(super) const MEMBERS_CHANGED: &str = "relayger_members_changed";

pub(super) const LOCK_ROOM: &str = "SELECT last_seq FROM rooms WHERE id = $1 FOR NO KEY UPDATE";

/// Why a fenced update matched nothing: everything in one read.
pub(super) const DIAGNOSE: &str = "\
SELECT EXISTS (SELECT 1 FROM runtimes WHERE id = $2 AND agent_id = $3) AS owned,
       j.job_key, j.room_id, j.state, j.lease_owner, j.lease_version,
       coalesce(j.lease_expires_at > clock_timestamp(), false) AS unexpired,
       EXISTS (SELECT 1 FROM room_members m
               WHERE m.room_id = j.room_id AND m.identity_id = $3 AND m.left_at IS NULL) AS member,
       c.fingerprint AS completed_fingerprint, c.outcome AS completed_outcome,
       a.fingerprint AS attempt_fingerprint, a.finish_response AS attempt_response
FROM (SELECT 1) one
LEFT JOIN jobs j ON j.id = $1 AND j.runtime_id = $2
LEFT JOIN completions c ON c.job_id = j.id
LEFT JOIN attempts a ON a.job_id = j.id AND a.lease_version = $4";

#[derive(QueryableByName)]
pub(super) struct Fenced {
    #[diesel(sql_type = Text)]
    pub(super) job_key: String,
    #[diesel(sql_type = SqlUuid)]
    pub(super) room_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    pub(super) message_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub(super) attempts: i32,
    #[diesel(sql_type = Jsonb)]
    pub(super) policy: serde_json::Value,
}

#[derive(QueryableByName)]
pub(super) struct Diagnosis {
    #[diesel(sql_type = Bool)]
    pub(super) owned: bool,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) job_key: Option<String>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub(super) room_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) state: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) lease_owner: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub(super) lease_version: Option<i64>,
    #[diesel(sql_type = Bool)]
    pub(super) unexpired: bool,
    #[diesel(sql_type = Bool)]
    pub(super) member: bool,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) completed_fingerprint: Option<String>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub(super) completed_outcome: Option<serde_json::Value>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) attempt_fingerprint: Option<String>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub(super) attempt_response: Option<serde_json::Value>,
}

#[derive(QueryableByName)]
pub(super) struct Wake {
    #[diesel(sql_type = Array<SqlUuid>)]
    pub(super) wake: Vec<Uuid>,
}

#[derive(QueryableByName)]
pub(super) struct FinishedInOne {
    #[diesel(sql_type = Bool)]
    pub(super) fenced: bool,
    #[diesel(sql_type = Array<SqlUuid>)]
    pub(super) wake: Vec<Uuid>,
}
