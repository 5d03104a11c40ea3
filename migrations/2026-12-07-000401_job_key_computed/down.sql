ALTER TABLE runtime_log ADD COLUMN job_key text;
UPDATE runtime_log SET job_key = 'job_' || replace(runtime_id::text, '-', '') || '_'
    || replace(room_id::text, '-', '') || '_' || replace(message_id::text, '-', '')
WHERE room_id IS NOT NULL AND message_id IS NOT NULL;
ALTER TABLE jobs ADD COLUMN job_key text;
UPDATE jobs SET job_key = 'job_' || replace(runtime_id::text, '-', '') || '_'
    || replace(room_id::text, '-', '') || '_' || replace(message_id::text, '-', '');
ALTER TABLE jobs ALTER COLUMN job_key SET NOT NULL;
ALTER TABLE jobs ADD CONSTRAINT jobs_job_key_key UNIQUE (job_key);
