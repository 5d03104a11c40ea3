CREATE OR REPLACE FUNCTION relayger_lease_fence(fenced_job uuid, fenced_runtime uuid,
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
