CREATE INDEX jobs_pending_idx ON jobs (runtime_id, created_at) WHERE state = 'pending';
DROP INDEX jobs_pending_order_idx;
