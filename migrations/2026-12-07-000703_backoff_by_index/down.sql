DROP INDEX jobs_backoff_idx;
