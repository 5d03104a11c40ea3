-- A table's CHECK constraints are read back from their stored text and
-- compiled again by every statement that inserts or updates the table:
-- with thirty of them on the tables a question writes, that was about a
-- fifth of PostgreSQL's CPU in `bench p2` (perf: ExecConstraints,
-- stringToNode). A domain's constraint is compiled once per connection
-- and kept. So every rule about one column becomes a domain, under the
-- constraint name it had (relayger-core's stored enums are checked against
-- those names); the rules that relate two columns stay table constraints.
CREATE DOMAIN job_state AS text
    CONSTRAINT jobs_state_check CHECK (VALUE IN ('pending', 'claimed', 'handled', 'skipped', 'dead'));
CREATE DOMAIN attempt_outcome AS text
    CONSTRAINT attempts_outcome_check CHECK (VALUE IN ('replied', 'skipped', 'handled', 'failed'));
CREATE DOMAIN attempt_end AS text
    CONSTRAINT attempts_ended_check CHECK (VALUE IN ('finished', 'expired', 'released'));
CREATE DOMAIN attempt_end_event AS text
    CONSTRAINT attempts_end_event_check
    CHECK (VALUE IN ('replied', 'skipped', 'failed', 'expired', 'dead_letter', 'released'));
CREATE DOMAIN lease_owner AS text CONSTRAINT lease_owner_check CHECK (VALUE ~ '^[0-9a-f]{32}$');
CREATE DOMAIN room_kind AS text CONSTRAINT rooms_kind_check CHECK (VALUE IN ('direct', 'group'));
CREATE DOMAIN room_name AS text
    CONSTRAINT rooms_name_check CHECK (char_length(VALUE) >= 1 AND char_length(VALUE) <= 100);
CREATE DOMAIN message_text AS text
    CONSTRAINT messages_text_check CHECK (octet_length(VALUE) <= 65536);
-- Counts and sequence positions that start at zero, and numbers that start at one.
CREATE DOMAIN count_int AS integer CONSTRAINT count_int_check CHECK (VALUE >= 0);
CREATE DOMAIN count_bigint AS bigint CONSTRAINT count_bigint_check CHECK (VALUE >= 0);
CREATE DOMAIN ordinal_int AS integer CONSTRAINT ordinal_int_check CHECK (VALUE >= 1);
CREATE DOMAIN ordinal_bigint AS bigint CONSTRAINT ordinal_bigint_check CHECK (VALUE >= 1);

ALTER TABLE jobs
    DROP CONSTRAINT jobs_state_check,
    DROP CONSTRAINT jobs_attempts_check,
    DROP CONSTRAINT jobs_lease_owner_check,
    DROP CONSTRAINT jobs_lease_version_check;
ALTER TABLE jobs
    ALTER COLUMN state TYPE job_state,
    ALTER COLUMN attempts TYPE count_int,
    ALTER COLUMN lease_owner TYPE lease_owner,
    ALTER COLUMN lease_version TYPE ordinal_bigint;

ALTER TABLE attempts
    DROP CONSTRAINT attempts_attempt_check,
    DROP CONSTRAINT attempts_outcome_check,
    DROP CONSTRAINT attempts_ended_check,
    DROP CONSTRAINT attempts_end_event_check,
    DROP CONSTRAINT attempts_grant_seq_check,
    DROP CONSTRAINT attempts_lease_owner_check,
    DROP CONSTRAINT attempts_model_calls_check,
    DROP CONSTRAINT attempts_input_tokens_check,
    DROP CONSTRAINT attempts_output_tokens_check;
ALTER TABLE attempts
    ALTER COLUMN attempt TYPE ordinal_int,
    ALTER COLUMN outcome TYPE attempt_outcome,
    ALTER COLUMN ended TYPE attempt_end,
    ALTER COLUMN end_event TYPE attempt_end_event,
    ALTER COLUMN grant_seq TYPE ordinal_bigint,
    ALTER COLUMN lease_owner TYPE lease_owner,
    ALTER COLUMN model_calls TYPE count_bigint,
    ALTER COLUMN input_tokens TYPE count_bigint,
    ALTER COLUMN output_tokens TYPE count_bigint;

ALTER TABLE messages
    DROP CONSTRAINT messages_seq_check,
    DROP CONSTRAINT messages_text_check;
ALTER TABLE messages
    ALTER COLUMN seq TYPE ordinal_bigint,
    ALTER COLUMN text TYPE message_text;

ALTER TABLE rooms
    DROP CONSTRAINT rooms_kind_check,
    DROP CONSTRAINT rooms_last_seq_check,
    DROP CONSTRAINT rooms_name_check;
ALTER TABLE rooms
    ALTER COLUMN kind TYPE room_kind,
    ALTER COLUMN last_seq TYPE count_bigint,
    ALTER COLUMN name TYPE room_name;

ALTER TABLE runtime_checkpoints DROP CONSTRAINT runtime_checkpoints_seq_check;
ALTER TABLE runtime_checkpoints ALTER COLUMN seq TYPE count_bigint;
ALTER TABLE mailbox_cursors DROP CONSTRAINT mailbox_cursors_acked_seq_check;
ALTER TABLE mailbox_cursors ALTER COLUMN acked_seq TYPE count_bigint;
