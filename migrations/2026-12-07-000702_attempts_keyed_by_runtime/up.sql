-- An attempt is found by its runtime and lease version: every statement
-- that ends one names both, and the log pages a runtime's attempts by
-- version. One index, the primary key, now serves both, where a key on the
-- version and an index on (runtime, version) each took an entry for every
-- grant. A version comes from one global sequence, so it stays unique.
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY (runtime_id, lease_version);
DROP INDEX attempts_log_idx;
