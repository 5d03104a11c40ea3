DROP INDEX jobs_dead_idx;
CREATE INDEX jobs_dead_idx ON jobs (runtime_id) WHERE state = 'dead';
