-- What a claim plans with (relayger_core::claim_plan): the database clock,
-- the active leases (at most the concurrency cap: a partial-index range)
-- and the budget window as two index lookups. Each attempt carries the
-- runtime's running grant count (`grant_seq`), so the grants of the rolling
-- hour are the newest `grant_seq` minus the newest before the hour. The
-- earliest expiry of those leases is a granting claim's `retryAt`: when a
-- lease may run out (its owner cut off or gone) and its job be taken over.
--
-- $1 runtime_id: the runtime claimed
SELECT now() AS now,
       (SELECT count(*) FROM jobs
        WHERE runtime_id = $1::uuid AND state = 'claimed') AS active,
       (SELECT min(lease_expires_at) FROM jobs
        WHERE runtime_id = $1::uuid AND state = 'claimed') AS next_expiry,
       COALESCE((SELECT grant_seq FROM attempts WHERE runtime_id = $1::uuid
                 ORDER BY claimed_at DESC, grant_seq DESC LIMIT 1), 0) AS budget_last,
       COALESCE((SELECT grant_seq FROM attempts WHERE runtime_id = $1::uuid
                   AND claimed_at <= now() - interval '1 hour'
                 ORDER BY claimed_at DESC, grant_seq DESC LIMIT 1), 0) AS budget_before_window
