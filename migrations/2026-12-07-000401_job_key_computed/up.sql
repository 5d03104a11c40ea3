-- A job's key is a function of its runtime, room and message
-- (relayger-core's `job::job_key`), which the job row already holds, and
-- (runtime, room, message) is already unique: the stored copy and its
-- unique index went into every job write and every log record for nothing.
ALTER TABLE jobs DROP COLUMN job_key;
ALTER TABLE runtime_log DROP COLUMN job_key;
