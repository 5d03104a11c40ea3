ALTER TABLE jobs RESET (fillfactor);
DROP INDEX jobs_claimed_idx;
CREATE INDEX jobs_claimed_idx ON jobs (runtime_id, lease_expires_at) WHERE state = 'claimed';
