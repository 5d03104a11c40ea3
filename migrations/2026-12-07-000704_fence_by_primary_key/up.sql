-- The one fence finds the job by its primary key. Its query's other tests
-- (runtime, state, owner, version) are written as one `IS TRUE`, so no plan
-- can answer them from the claimed jobs' partial index: the generic plan a
-- session caches for the function chose that index by runtime, and every
-- heartbeat, release and finish walked all of the runtime's claimed jobs
-- (up to its processes × concurrency) to find its one. The rule is
-- unchanged: lock the row if it is this runtime's job, claimed by this
-- owner under this version, then judge the expiry by the clock after the
-- lock.
CREATE OR REPLACE FUNCTION relayger_lease_fence(fenced_job uuid, fenced_runtime uuid,
                                                presented_owner text, presented_version bigint)
RETURNS uuid
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    expires timestamptz;
BEGIN
    SELECT j.lease_expires_at INTO expires FROM jobs j
    WHERE j.id = fenced_job
      AND (j.runtime_id = fenced_runtime AND j.state = 'claimed'
           AND j.lease_owner = presented_owner AND j.lease_version = presented_version) IS TRUE
    FOR NO KEY UPDATE;
    IF expires > clock_timestamp() THEN
        RETURN fenced_job;
    END IF;
    RETURN NULL;
END
$$;
