-- Dead letters per runtime for the metrics gauges (and the dead-letter
-- list) without scanning finished jobs.
CREATE INDEX jobs_dead_idx ON jobs (runtime_id) WHERE state = 'dead';
