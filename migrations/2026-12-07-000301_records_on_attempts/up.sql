-- What a grant and an attempt's end write, once. The attempt row is the
-- grant: it carries the runtime's running grant count (`grant_seq`, for the
-- rolling hourly budget) and replaces the budget unit and the `claimed` log
-- record. Once ended it is also the end's record (`end_event`, `ended_at`):
-- `replied`, `skipped`, `failed`, `expired`, `dead_letter` or `released`.
-- The log reads attempts and runtime_log together; runtime_log keeps what
-- has no attempt: registrations, configures, policy skips, manual retries.

-- The attempts' reply foreign key is checked at commit; this migration
-- updates attempts and then alters the table, which PostgreSQL refuses
-- while row checks are still pending, so they run at once here.
SET CONSTRAINTS ALL IMMEDIATE;

-- Attempts are keyed by their lease version; log rows draw their ids from
-- the same sequence, so record ids of both tables follow one order.
ALTER TABLE attempts DROP COLUMN id;
ALTER TABLE attempts DROP CONSTRAINT attempts_lease_version_key;
ALTER TABLE attempts ADD PRIMARY KEY (lease_version);
SELECT setval('lease_version_seq',
              greatest((SELECT last_value FROM lease_version_seq),
                       (SELECT coalesce(max(id), 0) FROM runtime_log)) + 1,
              false);
ALTER TABLE runtime_log ALTER COLUMN id SET DEFAULT nextval('lease_version_seq');
DROP SEQUENCE runtime_log_id_seq;

-- The budget: a runtime's grants numbered in claim order (claims of one
-- runtime are serialised by its row lock and stamp claimed_at with
-- clock_timestamp(), so grant_seq and claimed_at rise together); the grants
-- of the rolling hour are the newest grant_seq minus the newest before the
-- hour, two lookups of one index.
ALTER TABLE attempts ADD COLUMN grant_seq bigint;
UPDATE attempts a SET grant_seq = n.seq
FROM (SELECT lease_version,
             row_number() OVER (PARTITION BY runtime_id ORDER BY claimed_at, lease_version) AS seq
      FROM attempts) n
WHERE n.lease_version = a.lease_version;
ALTER TABLE attempts ALTER COLUMN grant_seq SET NOT NULL;
ALTER TABLE attempts ADD CONSTRAINT attempts_grant_seq_check CHECK (grant_seq >= 1);
DROP INDEX attempts_runtime_idx;
CREATE INDEX attempts_budget_idx ON attempts (runtime_id, claimed_at, grant_seq);
CREATE INDEX attempts_log_idx ON attempts (runtime_id, lease_version);
DROP TABLE budget_units;

-- The end of an attempt as its log record.
ALTER TABLE attempts ADD COLUMN ended_at timestamptz;
ALTER TABLE attempts ADD COLUMN end_event text;
UPDATE attempts a
SET ended_at = coalesce(a.finished_at, a.claimed_at),
    end_event = CASE
        WHEN a.ended = 'released' THEN 'released'
        WHEN a.outcome IN ('replied', 'handled') THEN 'replied'
        WHEN a.outcome = 'skipped' THEN 'skipped'
        WHEN j.state = 'dead' AND a.attempt = j.attempts THEN 'dead_letter'
        WHEN a.outcome = 'failed' THEN 'failed'
        ELSE 'expired' END
FROM jobs j
WHERE j.id = a.job_id AND a.ended IS NOT NULL;
ALTER TABLE attempts ADD CONSTRAINT attempts_end_event_check CHECK (end_event IN (
    'replied', 'skipped', 'failed', 'expired', 'dead_letter', 'released'));
ALTER TABLE attempts ADD CONSTRAINT attempts_end_check
    CHECK ((ended IS NULL) = (end_event IS NULL) AND (ended IS NULL) = (ended_at IS NULL));
DELETE FROM runtime_log WHERE detail ? 'attempt' OR kind = 'released';
