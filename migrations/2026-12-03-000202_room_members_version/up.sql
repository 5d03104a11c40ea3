-- Bumped by every change to who reads a room — a join, a runtime registered
-- `--from now` — each under the room row lock: the one-statement send compares
-- it with its snapshot's value, so a send that waited for such a lock falls
-- back to the locked path, which reads members and runtimes afresh.
ALTER TABLE rooms ADD COLUMN members_version bigint NOT NULL DEFAULT 0;
