-- What a claim needs for `retryAt`: the next lease expiry (a granting
-- claim's own grants included: it takes claim_state.sql's instead), whether
-- anything is pending, when the budget window's oldest grant was made (the
-- window is the transaction's, as in claim_state.sql), the next backoff end.
--
-- $1 runtime_id: the runtime claimed
SELECT
    (SELECT min(lease_expires_at) FROM jobs
     WHERE runtime_id = $1::uuid AND state = 'claimed') AS lease_expiry,
    EXISTS (SELECT 1 FROM jobs WHERE runtime_id = $1::uuid AND state = 'pending') AS pending,
    (SELECT claimed_at FROM attempts
     WHERE runtime_id = $1::uuid AND claimed_at > now() - interval '1 hour'
     ORDER BY claimed_at, grant_seq LIMIT 1) AS oldest_unit,
    (SELECT min(not_before) FROM jobs
     WHERE runtime_id = $1::uuid AND state = 'pending' AND not_before > now()) AS backoff
