-- What an idle claim needs for `retryAt`: the next lease expiry, whether
-- anything is pending, the oldest unit in the budget window (by its
-- `seq`), the next backoff end.
--
-- $1 runtime_id: the runtime claimed
-- $2 oldest_unit_seq: the `seq` of the budget window's oldest unit
SELECT
    (SELECT min(lease_expires_at) FROM jobs
     WHERE runtime_id = $1::uuid AND state = 'claimed') AS lease_expiry,
    EXISTS (SELECT 1 FROM jobs WHERE runtime_id = $1::uuid AND state = 'pending') AS pending,
    (SELECT granted_at FROM budget_units
     WHERE runtime_id = $1::uuid AND seq = $2::bigint) AS oldest_unit,
    (SELECT min(not_before) FROM jobs
     WHERE runtime_id = $1::uuid AND state = 'pending' AND not_before > now()) AS backoff
