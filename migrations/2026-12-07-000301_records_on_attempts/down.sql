SET CONSTRAINTS ALL IMMEDIATE;
-- The records an attempt stands for go back into runtime_log, the grants
-- back into budget units.
INSERT INTO runtime_log (runtime_id, at, kind, job_key, room_id, message_id, detail)
SELECT a.runtime_id, a.claimed_at, 'claimed', j.job_key, j.room_id, j.message_id,
       jsonb_build_object('attempt', a.attempt, 'version', lpad(a.lease_version::text, 20, '0'))
FROM attempts a JOIN jobs j ON j.id = a.job_id;
INSERT INTO runtime_log (runtime_id, at, kind, job_key, room_id, message_id, detail)
SELECT a.runtime_id, a.ended_at, a.end_event, j.job_key, j.room_id, j.message_id,
       CASE WHEN a.end_event = 'released' THEN '{}'::jsonb
            ELSE jsonb_build_object('attempt', a.attempt) END
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.end_event IS NOT NULL;
CREATE SEQUENCE runtime_log_id_seq OWNED BY runtime_log.id;
SELECT setval('runtime_log_id_seq', (SELECT coalesce(max(id), 0) + 1 FROM runtime_log), false);
ALTER TABLE runtime_log ALTER COLUMN id SET DEFAULT nextval('runtime_log_id_seq');
CREATE TABLE budget_units (
    id          bigserial PRIMARY KEY,
    runtime_id  uuid NOT NULL REFERENCES runtimes (id) ON DELETE CASCADE,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    seq         bigint NOT NULL CHECK (seq >= 1)
);
CREATE INDEX budget_units_window_idx ON budget_units (runtime_id, granted_at);
CREATE UNIQUE INDEX budget_units_seq_idx ON budget_units (runtime_id, seq);
INSERT INTO budget_units (runtime_id, granted_at, seq)
SELECT runtime_id, claimed_at, grant_seq FROM attempts;
ALTER TABLE attempts DROP CONSTRAINT attempts_end_check;
ALTER TABLE attempts DROP CONSTRAINT attempts_end_event_check;
ALTER TABLE attempts DROP COLUMN end_event;
ALTER TABLE attempts DROP COLUMN ended_at;
DROP INDEX attempts_log_idx;
DROP INDEX attempts_budget_idx;
CREATE INDEX attempts_runtime_idx ON attempts (runtime_id);
ALTER TABLE attempts DROP COLUMN grant_seq;
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD CONSTRAINT attempts_lease_version_key UNIQUE (lease_version);
ALTER TABLE attempts ADD COLUMN id bigserial PRIMARY KEY;
