-- The runtime's expired leases, locked for the claim that ends them. A job
-- row someone else holds (a finish that is being fenced out) is left for
-- the next claim instead of holding this one, and the runtime row with it,
-- until that transaction ends. Only a runtime of the agent: a claim sends
-- this in the same flight as its runtime lock, before it knows whether the
-- runtime is the caller's.
--
-- A lease is judged by the database clock read after the runtime's lock
-- (`clock_timestamp()`), as the fence judges one after the job's: a claim
-- that waited for the lock takes over the leases that ran out meanwhile.
--
-- $1 runtime_id: the runtime claimed
-- $2 agent_id: the caller, who must own it
SELECT id, attempts, lease_version
FROM jobs
WHERE runtime_id = $1::uuid AND state = 'claimed' AND lease_expires_at <= clock_timestamp()
  AND EXISTS (SELECT 1 FROM runtimes WHERE id = $1::uuid AND agent_id = $2::uuid)
FOR UPDATE OF jobs SKIP LOCKED
