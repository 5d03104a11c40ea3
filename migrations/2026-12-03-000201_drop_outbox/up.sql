-- Wake signals no longer go through a table: the committing instance wakes
-- its own sockets after the commit and NOTIFYs the others on a connection of
-- its own (NOTIFY is a hint; reconnects and fallback polls cover a crash).
DROP TABLE outbox;
