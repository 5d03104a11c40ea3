-- A job's completion is the attempt that completed it: the attempt already
-- holds the outcome, the usage and (for an error finish) the fingerprint and
-- answer a retry replays, so every finish now keeps its fingerprint, its
-- answer and its reply on the attempt, and the completions table, which
-- repeated them, goes. A job completes at most once (the fence), so a job's
-- completion is its one attempt with a completing outcome.
ALTER TABLE attempts ADD COLUMN reply_room_id uuid;
ALTER TABLE attempts ADD COLUMN reply_message_id uuid;
UPDATE attempts a
SET fingerprint = c.fingerprint, finish_response = c.outcome,
    reply_room_id = c.reply_room_id, reply_message_id = c.reply_message_id
FROM completions c
WHERE a.job_id = c.job_id AND a.lease_version = c.lease_version;
ALTER TABLE attempts ADD CONSTRAINT attempts_reply_check
    CHECK ((reply_room_id IS NULL) = (reply_message_id IS NULL));
-- Checked at commit: the long-way finish records the attempt's end before
-- it appends the reply, in the same transaction.
ALTER TABLE attempts ADD CONSTRAINT attempts_reply_fkey
    FOREIGN KEY (reply_room_id, reply_message_id) REFERENCES messages (room_id, id)
    DEFERRABLE INITIALLY DEFERRED;
DROP TABLE completions;
-- An attempt is written twice (granted, then ended), and neither write
-- changes an indexed column: room on the page keeps the second write a
-- heap-only update, with no new index entries.
ALTER TABLE attempts SET (fillfactor = 60);
