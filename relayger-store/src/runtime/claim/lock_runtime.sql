-- The runtime a claim is for, locked: only when it is the agent's, so for
-- anyone else's runtime this locks nothing and the claim answers "not
-- found". NO KEY UPDATE, not UPDATE: it serialises the claims and
-- configures of the runtime (the concurrency cap and the hourly budget are
-- exact across processes), yet lets a concurrent finish insert rows that
-- reference the runtime (their foreign keys take KEY SHARE).
--
-- $1 runtime_id: the runtime claimed
-- $2 agent_id: the caller, who must own it
SELECT id, agent_id, name, from_mode, policy, policy_fingerprint, config_version,
       created_at, updated_at
FROM runtimes
WHERE id = $1::uuid AND agent_id = $2::uuid
FOR NO KEY UPDATE
