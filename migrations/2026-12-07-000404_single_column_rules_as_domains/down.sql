ALTER TABLE mailbox_cursors ALTER COLUMN acked_seq TYPE bigint;
ALTER TABLE mailbox_cursors ADD CONSTRAINT mailbox_cursors_acked_seq_check CHECK (acked_seq >= 0);
ALTER TABLE runtime_checkpoints ALTER COLUMN seq TYPE bigint;
ALTER TABLE runtime_checkpoints ADD CONSTRAINT runtime_checkpoints_seq_check CHECK (seq >= 0);

ALTER TABLE rooms
    ALTER COLUMN kind TYPE text,
    ALTER COLUMN last_seq TYPE bigint,
    ALTER COLUMN name TYPE text;
ALTER TABLE rooms
    ADD CONSTRAINT rooms_kind_check CHECK (kind = ANY (ARRAY['direct', 'group'])),
    ADD CONSTRAINT rooms_last_seq_check CHECK (last_seq >= 0),
    ADD CONSTRAINT rooms_name_check CHECK (name IS NULL OR (char_length(name) >= 1 AND char_length(name) <= 100));

ALTER TABLE messages
    ALTER COLUMN seq TYPE bigint,
    ALTER COLUMN text TYPE text;
ALTER TABLE messages
    ADD CONSTRAINT messages_seq_check CHECK (seq >= 1),
    ADD CONSTRAINT messages_text_check CHECK (text IS NULL OR octet_length(text) <= 65536);

ALTER TABLE attempts
    ALTER COLUMN attempt TYPE integer,
    ALTER COLUMN outcome TYPE text,
    ALTER COLUMN ended TYPE text,
    ALTER COLUMN end_event TYPE text,
    ALTER COLUMN grant_seq TYPE bigint,
    ALTER COLUMN lease_owner TYPE text,
    ALTER COLUMN model_calls TYPE bigint,
    ALTER COLUMN input_tokens TYPE bigint,
    ALTER COLUMN output_tokens TYPE bigint;
ALTER TABLE attempts
    ADD CONSTRAINT attempts_attempt_check CHECK (attempt >= 1),
    ADD CONSTRAINT attempts_outcome_check CHECK (outcome IS NULL OR outcome = ANY (ARRAY['replied', 'skipped', 'handled', 'failed'])),
    ADD CONSTRAINT attempts_ended_check CHECK (ended IS NULL OR ended = ANY (ARRAY['finished', 'expired', 'released'])),
    ADD CONSTRAINT attempts_end_event_check CHECK (end_event = ANY (ARRAY['replied', 'skipped', 'failed', 'expired', 'dead_letter', 'released'])),
    ADD CONSTRAINT attempts_grant_seq_check CHECK (grant_seq >= 1),
    ADD CONSTRAINT attempts_lease_owner_check CHECK (lease_owner ~ '^[0-9a-f]{32}$'),
    ADD CONSTRAINT attempts_model_calls_check CHECK (model_calls IS NULL OR model_calls >= 0),
    ADD CONSTRAINT attempts_input_tokens_check CHECK (input_tokens IS NULL OR input_tokens >= 0),
    ADD CONSTRAINT attempts_output_tokens_check CHECK (output_tokens IS NULL OR output_tokens >= 0);

ALTER TABLE jobs
    ALTER COLUMN state TYPE text,
    ALTER COLUMN attempts TYPE integer,
    ALTER COLUMN lease_owner TYPE text,
    ALTER COLUMN lease_version TYPE bigint;
ALTER TABLE jobs
    ADD CONSTRAINT jobs_state_check CHECK (state = ANY (ARRAY['pending', 'claimed', 'handled', 'skipped', 'dead'])),
    ADD CONSTRAINT jobs_attempts_check CHECK (attempts >= 0),
    ADD CONSTRAINT jobs_lease_owner_check CHECK (lease_owner IS NULL OR lease_owner ~ '^[0-9a-f]{32}$'),
    ADD CONSTRAINT jobs_lease_version_check CHECK (lease_version IS NULL OR lease_version >= 1);

DROP DOMAIN ordinal_bigint, ordinal_int, count_bigint, count_int, message_text, room_name,
    room_kind, lease_owner, attempt_end_event, attempt_end, attempt_outcome, job_state;
