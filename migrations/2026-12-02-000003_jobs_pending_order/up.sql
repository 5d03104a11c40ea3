-- Claims pick pending jobs with ORDER BY created_at, id. A scan creates all
-- its jobs in one transaction, so thousands share one created_at, and with
-- only (runtime_id, created_at) indexed every claim had to read and sort a
-- whole such group to find its LIMIT rows. With id in the key the index
-- yields rows already in claim order and the LIMIT stops the read early.
CREATE INDEX jobs_pending_order_idx ON jobs (runtime_id, created_at, id) WHERE state = 'pending';
-- Superseded: the new index serves every query the old one did (same
-- predicate, same leading columns), and each index costs a write per job.
DROP INDEX jobs_pending_idx;
