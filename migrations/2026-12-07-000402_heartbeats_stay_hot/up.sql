-- A heartbeat changes only a claimed job's lease expiry. With the expiry in
-- `jobs_claimed_idx` every heartbeat was a non-HOT update: a new entry in
-- each of the table's indexes every ten seconds of every running handler.
-- The claimed jobs of a runtime are at most its concurrency (1..64, plus
-- expired leases the next claim ends), so the index need only find them by
-- runtime; the statements that compare expiries read those few rows.
-- Free space on each page lets the renewed row stay on its page.
DROP INDEX jobs_claimed_idx;
CREATE INDEX jobs_claimed_idx ON jobs (runtime_id) WHERE state = 'claimed';
ALTER TABLE jobs SET (fillfactor = 70);
