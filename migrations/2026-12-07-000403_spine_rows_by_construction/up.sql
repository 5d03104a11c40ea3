-- An attempt names rows that the statement inserting it reads or writes,
-- and that nothing deletes on their own: its job (the grant that inserts
-- the attempt updates the job in the same statement) and its reply (the
-- finish that records it inserts the reply in the same statement). Jobs and
-- attempts go only with their runtime, each by its own `runtime_id` key;
-- messages are never deleted. Each of these two foreign keys checked a row
-- that was there by construction, with a query and a share lock written to
-- the WAL, per grant and per reply.
ALTER TABLE attempts DROP CONSTRAINT attempts_job_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT attempts_reply_fkey;
-- A finish widens its attempt (the outcome, the fingerprint, the response,
-- the usage) to about twice its claimed size; with room for that on its
-- page the update stays HOT and writes none of the attempt's four indexes.
ALTER TABLE attempts SET (fillfactor = 30);
