CREATE INDEX attempts_log_idx ON attempts (runtime_id, lease_version);
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY (lease_version);
