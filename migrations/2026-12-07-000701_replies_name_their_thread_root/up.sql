-- A writer that knows a message's thread root names it: the finish's batch
-- statement reads each question's root in the statement that inserts the
-- replies. The trigger fills it in for every writer that does not (a send,
-- a sealed send, a reply the long way); its WHEN clause is judged without
-- calling the function, so a batch of replies runs no trigger function.
-- A change of the parent still takes the new parent's root.
DROP TRIGGER messages_thread_root ON messages;
CREATE TRIGGER messages_thread_root BEFORE INSERT ON messages
    FOR EACH ROW WHEN (NEW.thread_root IS NULL) EXECUTE FUNCTION relayger_message_thread_root();
CREATE TRIGGER messages_thread_root_moved BEFORE UPDATE OF reply_to ON messages
    FOR EACH ROW EXECUTE FUNCTION relayger_message_thread_root();
