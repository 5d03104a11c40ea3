-- The end of one fenced attempt, the long way: its outcome, usage,
-- fingerprint and, for a failed attempt, its answer (a retry with the same
-- fingerprint gets the answer back; a completion's answer is read back from
-- its outcome and reply, so it is not stored), the reply it names
-- (appended next by insert_reply.sql; the foreign key is checked at
-- commit), and its end event, which is its log record.
--
-- $1  version          bigint
-- $2  outcome          text    the attempt's outcome
-- $3  error            text    an error finish's error, else NULL
-- $4  model_calls      bigint  reported usage, all three NULL when unreported
-- $5  input_tokens     bigint
-- $6  output_tokens    bigint
-- $7  fingerprint      text    the completion fingerprint (hex; stored as bytes)
-- $8  response         jsonb   a failed attempt's answer, else NULL
-- $9  reply_room_id    uuid    NULL without a reply
-- $10 reply_message_id uuid    NULL without a reply
-- $11 end_event        text    the attempt's end as a log record
-- $12 runtime_id       uuid
UPDATE attempts
SET finished_at = now(), outcome = $2, ended = 'finished', error = $3,
    model_calls = $4, input_tokens = $5, output_tokens = $6,
    fingerprint = decode($7, 'hex'), finish_response = $8,
    reply_room_id = $9, reply_message_id = $10,
    ended_at = clock_timestamp(), end_event = $11
WHERE runtime_id = $12 AND lease_version = $1
