-- The end of one fenced attempt, the long way: the completion when the job
-- completes without a reply (`$5`; a reply's completion goes with the reply,
-- insert_reply.sql), the attempt's outcome and usage (and, for an error
-- finish, the fingerprint and answer a retry replays), and the log record.
--
-- $1  job_id           uuid
-- $2  version          bigint
-- $3  fingerprint      text    the completion fingerprint
-- $4  completion       jsonb   the completion's answer (ignored unless $5)
-- $5  with_completion  boolean
-- $6  outcome          text    the attempt's outcome
-- $7  error            text    an error finish's error, else NULL
-- $8  model_calls      bigint  reported usage, all three NULL when unreported
-- $9  input_tokens     bigint
-- $10 output_tokens    bigint
-- $11 replay_fingerprint text  an error finish's fingerprint, else NULL
-- $12 replay_response  jsonb   an error finish's answer, else NULL
-- $13 runtime_id       uuid
-- $14 log_kind         text
-- $15 job_key          text
-- $16 room_id          uuid
-- $17 message_id       uuid
-- $18 detail           jsonb   the log record's detail
WITH completed AS (
    INSERT INTO completions (job_id, fingerprint, lease_version, outcome)
    SELECT $1, $3, $2, $4 WHERE $5
), attempt AS (
    UPDATE attempts
    SET finished_at = now(), outcome = $6, ended = 'finished', error = $7,
        model_calls = $8, input_tokens = $9, output_tokens = $10,
        fingerprint = $11, finish_response = $12
    WHERE lease_version = $2
)
INSERT INTO runtime_log (runtime_id, kind, job_key, room_id, message_id, detail)
VALUES ($13, $14, $15, $16, $17, $18)
