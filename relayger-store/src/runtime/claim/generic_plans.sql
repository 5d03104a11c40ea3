-- The claim's transaction plans its prepared statements generically: the
-- same setting as `SET LOCAL plan_cache_mode = force_generic_plan`, as a
-- statement that can be prepared. It ends with the transaction, so it holds
-- through a transaction pooler too. Why: `generic_plans` in claim.rs.
--
-- A generic plan guesses every array parameter at ten elements; at the
-- default `random_page_cost` (4, a disk seek) ten lookups by primary key
-- cost as much as reading a table of a thousand narrow jobs, and the
-- planner chose the sequential scan, which tests `id = ANY($n)` on every
-- row of every runtime. The rows a claim reads are its runtime's recent
-- jobs and attempts, in shared buffers, where a random page costs about
-- what a sequential one does: the claim plans with the cost PostgreSQL's
-- documentation suggests for that case (runtime/plan_tests.rs).
--
-- And without sequential scans: a connection keeps the plan it made at a
-- runtime's first claim, when the runtime (or the database) had no job yet
-- and a sequential scan of the empty table cost nothing; that plan then
-- read every job of every runtime on each later claim until an analyze
-- replanned it. Every table a claim reads has an index for what it reads
-- (a statement planned with a disabled path anyway costs more than
-- `jit_above_cost`: plan_tests.rs refuses one). And without JIT, which
-- compiles a plan on each run, milliseconds for statements that run in
-- microseconds.
--
-- And the claim waits for a lock, its runtime's row first, at most a third
-- of the lease it grants (`relayger_core::lease::claim_lock_wait_ms`): a
-- longer wait answers "busy, retry" (503) rather than grant a lease the
-- worker, counting it from its request, has too little of.
--
-- $1 lock_wait_ms: how long a lock wait may last (claim_lock_wait_ms)
SELECT set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache_mode,
       set_config('random_page_cost', '1.1', true) AS random_page_cost,
       set_config('enable_seqscan', 'off', true) AS enable_seqscan,
       set_config('jit', 'off', true) AS jit,
       set_config('lock_timeout', $1::bigint || 'ms', true) AS lock_timeout
