-- One round of a claim's candidates: pending jobs of the runtime whose
-- backoff has passed, oldest first after the last one the claim has seen,
-- read without row locks (only a claim takes a job out of pending, and a
-- claim holds the runtime's lock, lock_runtime.sql; grant_and_skip.sql
-- writes a job only while it is still pending), each with
-- its message and sender, whether its asker canceled it, whether the agent
-- is still a member of the room and whether the agent and the sender have
-- blocked one another (a block reaches group rooms the two still share). The claim judges them with
-- `Policy::judge`.
--
-- The first round is sent in the claim's first flight, before the claim
-- has read the policy and the active leases; it applies
-- `claim_plan::first_round_limit` to the stored concurrency and the
-- claimed jobs itself, so a claim of a runtime at its cap reads no job.
-- That is the one place SQL applies the rule; the store test
-- `the_first_candidate_round_takes_what_claim_plan_says` holds it to the
-- core's. Later rounds take `$6` rows, the size the plan gave them.
-- Only a runtime of the agent, as its siblings in that flight: the
-- first round is sent before the claim knows the runtime is the caller's,
-- and another agent's claim must not read the pending jobs of a runtime
-- that is not its own.
--
-- $1 runtime_id: the runtime claimed
-- $2 agent_id: the runtime's agent, the caller
-- $3 rooms: the caller's token's rooms, NULL for an unrestricted token
-- $4 after_created_at: the last candidate seen, NULL in the first round
-- $5 after_id: the last candidate seen (with $4)
-- $6 round_size: the most rows the round reads (claim_plan)
-- $7 first_round_margin: `claim_plan::ROUND_MARGIN` in the first round,
--    NULL in later ones
SELECT j.id AS job_id, j.created_at AS job_created_at,
       EXISTS (SELECT 1 FROM question_cancels qc
               WHERE qc.room_id = j.room_id AND qc.message_id = j.message_id) AS canceled,
       EXISTS (SELECT 1 FROM room_members rm
               WHERE rm.room_id = j.room_id AND rm.identity_id = $2::uuid
                 AND rm.left_at IS NULL) AS member,
       EXISTS (SELECT 1 FROM blocks b
               WHERE (b.blocker_id = $2::uuid AND b.blocked_id = m.sender_id)
                  OR (b.blocked_id = $2::uuid AND b.blocker_id = m.sender_id)) AS sender_blocked,
       m.id, m.room_id, m.seq, m.sender_id, m.text, m.sealed, m.ask, m.deadline,
       m.reply_to, m.by_runtime, m.created_at, i.number, i.kind
FROM jobs j
JOIN messages m ON m.room_id = j.room_id AND m.id = j.message_id
JOIN identities i ON i.id = m.sender_id
WHERE j.runtime_id = $1::uuid AND j.state = 'pending'
  AND EXISTS (SELECT 1 FROM runtimes WHERE id = $1::uuid AND agent_id = $2::uuid)
  AND (j.not_before IS NULL OR j.not_before <= now())
  AND ($3::uuid[] IS NULL OR j.room_id = ANY($3::uuid[]))
  AND ($4::timestamptz IS NULL OR (j.created_at, j.id) > ($4::timestamptz, $5::uuid))
ORDER BY j.created_at, j.id
LIMIT (SELECT CASE WHEN $7::bigint IS NULL THEN $6::bigint
                   WHEN free.n <= 0 THEN 0
                   ELSE LEAST($6::bigint, free.n + $7::bigint) END
       FROM (SELECT (SELECT (policy->>'concurrency')::bigint
                     FROM runtimes WHERE id = $1::uuid)
                    - (SELECT count(*) FROM jobs
                       WHERE runtime_id = $1::uuid AND state = 'claimed') AS n) free)
