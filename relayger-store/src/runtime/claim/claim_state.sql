-- What a claim plans with (relayger_core::claim_plan): the database clock,
-- the active leases (at most the concurrency cap: a partial-index range)
-- and the budget window as two index lookups. Each budget unit carries the
-- runtime's running grant count (`seq`), so the units of the rolling hour
-- are the newest `seq` minus the newest `seq` before the hour.
--
-- $1 runtime_id: the runtime claimed
SELECT now() AS now,
       (SELECT count(*) FROM jobs
        WHERE runtime_id = $1::uuid AND state = 'claimed') AS active,
       COALESCE((SELECT seq FROM budget_units WHERE runtime_id = $1::uuid
                 ORDER BY seq DESC LIMIT 1), 0) AS budget_last,
       COALESCE((SELECT seq FROM budget_units WHERE runtime_id = $1::uuid
                   AND granted_at <= now() - interval '1 hour'
                 ORDER BY granted_at DESC, seq DESC LIMIT 1), 0) AS budget_before_window
