-- A handler may complete a job without a reply (a note only): that attempt
-- is `handled`.
ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_outcome_check
    CHECK (outcome IS NULL OR outcome IN ('replied', 'skipped', 'handled', 'failed'));
