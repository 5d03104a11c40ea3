CREATE INDEX messages_reply_to_idx ON messages (reply_to) WHERE reply_to IS NOT NULL;
DROP INDEX messages_thread_idx;
DROP TRIGGER messages_thread_root ON messages;
DROP FUNCTION relayger_message_thread_root();
ALTER TABLE messages DROP COLUMN thread_root;
