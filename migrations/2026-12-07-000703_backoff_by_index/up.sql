-- A claim reads when the runtime's next retry backoff ends (claim/
-- idle_facts.sql, for `retryAt`). Only pending jobs that wait out a backoff
-- have `not_before`; found through the pending jobs' index, the read walked
-- every pending job of the runtime (20,000 in `bench p2`: 3.5 ms a claim).
-- This index holds only the waiting ones, so a job without a backoff adds
-- no entry and the claim's update (which clears `not_before`) still writes
-- none for it.
CREATE INDEX jobs_backoff_idx ON jobs (runtime_id, not_before)
    WHERE state = 'pending' AND not_before IS NOT NULL;
