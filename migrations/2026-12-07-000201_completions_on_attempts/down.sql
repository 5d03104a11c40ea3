ALTER TABLE attempts RESET (fillfactor);
CREATE TABLE completions (
    job_id            uuid PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    fingerprint       text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    lease_version     bigint NOT NULL,
    reply_message_id  uuid,
    outcome           jsonb NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    reply_room_id     uuid,
    CONSTRAINT completions_reply_check CHECK ((reply_room_id IS NULL) = (reply_message_id IS NULL)),
    CONSTRAINT completions_reply_fkey FOREIGN KEY (reply_room_id, reply_message_id) REFERENCES messages (room_id, id)
);
INSERT INTO completions (job_id, fingerprint, lease_version, reply_message_id, outcome, reply_room_id)
SELECT job_id, fingerprint, lease_version, reply_message_id, finish_response, reply_room_id
FROM attempts WHERE outcome IN ('replied', 'skipped', 'handled');
UPDATE attempts SET fingerprint = NULL, finish_response = NULL WHERE outcome <> 'failed';
ALTER TABLE attempts DROP CONSTRAINT attempts_reply_fkey;
ALTER TABLE attempts DROP CONSTRAINT attempts_reply_check;
ALTER TABLE attempts DROP COLUMN reply_message_id;
ALTER TABLE attempts DROP COLUMN reply_room_id;
