-- The claim's transaction plans its prepared statements generically: the
-- same setting as `SET LOCAL plan_cache_mode = force_generic_plan`, as a
-- statement that can be prepared. It ends with the transaction, so it holds
-- through a transaction pooler too. Why: `generic_plans` in claim.rs.
--
-- No parameters.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache_mode
