-- Dead letters are listed newest first, in pages that continue after the
-- last one shown (`GET /v1/runtimes/{id}/dead-letters?after=`): the index
-- holds them in that order, so a page reads its rows and no more however
-- many a runtime has.
DROP INDEX jobs_dead_idx;
CREATE INDEX jobs_dead_idx ON jobs (runtime_id, updated_at DESC, id DESC) WHERE state = 'dead';
