DROP TRIGGER messages_thread_root_moved ON messages;
DROP TRIGGER messages_thread_root ON messages;
CREATE TRIGGER messages_thread_root BEFORE INSERT OR UPDATE OF reply_to ON messages
    FOR EACH ROW EXECUTE FUNCTION relayger_message_thread_root();
