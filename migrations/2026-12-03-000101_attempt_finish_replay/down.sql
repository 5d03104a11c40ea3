ALTER TABLE attempts DROP COLUMN finish_response;
ALTER TABLE attempts DROP COLUMN fingerprint;
