-- An error finish leaves no completion (the job is retried or dead-lettered),
-- so its attempt keeps what a retry of the same finish must get back: the
-- completion fingerprint and the response it was given.
ALTER TABLE attempts ADD COLUMN fingerprint text;
ALTER TABLE attempts ADD COLUMN finish_response jsonb;
