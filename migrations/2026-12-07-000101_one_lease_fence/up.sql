-- The one lease fence. Every lease write after a claim (a heartbeat, a
-- release, a finish) calls it in the statement that writes: it locks the
-- job row if this runtime's job is claimed by this owner under this
-- version, and only then judges the expiry, by the database clock at that
-- moment (clock_timestamp(), not the statement's start). A writer that
-- waited for the row lock past the lease's end is refused, whatever it
-- writes. Returns the job's id, or NULL when the lease is not the caller's
-- or has ended. relayger-core's `lease::LeaseFence` states the same rule.
CREATE FUNCTION relayger_lease_fence(fenced_job uuid, fenced_runtime uuid,
                                     presented_owner text, presented_version bigint)
RETURNS uuid
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    expires timestamptz;
BEGIN
    SELECT j.lease_expires_at INTO expires FROM jobs j
    WHERE j.id = fenced_job AND j.runtime_id = fenced_runtime AND j.state = 'claimed'
      AND j.lease_owner = presented_owner AND j.lease_version = presented_version
    FOR NO KEY UPDATE;
    IF expires > clock_timestamp() THEN
        RETURN fenced_job;
    END IF;
    RETURN NULL;
END
$$;

-- Log kinds are relayger-core's `job::RuntimeEvent`, like job states
-- (`JobState`), attempt outcomes (`AttemptOutcome`) and attempt ends
-- (`AttemptEnd`) in their CHECK constraints; a store test compares each
-- list with its enum.
ALTER TABLE runtime_log ADD CONSTRAINT runtime_log_kind_check CHECK (kind IN (
    'registered', 'configured', 'claimed', 'replied', 'skipped', 'failed',
    'expired', 'dead_letter', 'released', 'retried'));
