DROP INDEX jobs_dead_idx;
