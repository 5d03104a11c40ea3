-- Every message knows the root of its thread, so a thread page is an index
-- range (room, root, seq) however long the thread grows, where it was a
-- walk of the root's whole reply tree on every page.
ALTER TABLE messages ADD COLUMN thread_root uuid;

WITH RECURSIVE tree AS (
    SELECT room_id, id, id AS root FROM messages WHERE reply_to IS NULL
    UNION ALL
    SELECT m.room_id, m.id, t.root
    FROM tree t JOIN messages m ON m.room_id = t.room_id AND m.reply_to = t.id
)
UPDATE messages m SET thread_root = t.root
FROM tree t WHERE m.room_id = t.room_id AND m.id = t.id;

ALTER TABLE messages ALTER COLUMN thread_root SET NOT NULL;
ALTER TABLE messages ADD CONSTRAINT messages_thread_root_check
    CHECK ((reply_to IS NULL) = (thread_root = id));

-- The database sets it for every writer (a send, a sealed send, a finish's
-- reply), whatever the statement names: a root is its own thread's root, a
-- reply has its parent's. A missing parent is left to the foreign key, which
-- refuses it as before. Messages are never edited; an update of the parent
-- (only a test standing in for a hostile database does it) takes the new
-- parent's root.
CREATE FUNCTION relayger_message_thread_root() RETURNS trigger
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NEW.reply_to IS NULL THEN
        NEW.thread_root := NEW.id;
    ELSE
        NEW.thread_root := COALESCE(
            (SELECT p.thread_root FROM messages p
             WHERE p.room_id = NEW.room_id AND p.id = NEW.reply_to),
            NEW.reply_to);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER messages_thread_root BEFORE INSERT OR UPDATE OF reply_to ON messages
    FOR EACH ROW EXECUTE FUNCTION relayger_message_thread_root();

CREATE INDEX messages_thread_idx ON messages (room_id, thread_root, seq);
-- Only the old walk of the reply tree read by `reply_to`.
DROP INDEX messages_reply_to_idx;
