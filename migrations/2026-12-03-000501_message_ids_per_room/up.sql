-- A message id is unique within its room, not across rooms. A client
-- chooses the id of what it sends (a sealed message is bound to it), and a
-- send whose id was already used in a room the sender cannot see must
-- answer like a fresh id, or it would tell that the id exists there.
ALTER TABLE completions DROP CONSTRAINT completions_reply_message_id_fkey;
ALTER TABLE jobs DROP CONSTRAINT jobs_room_id_message_id_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_room_id_reply_to_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_room_id_id_key;
ALTER TABLE messages DROP CONSTRAINT messages_pkey;
ALTER TABLE messages ADD CONSTRAINT messages_pkey PRIMARY KEY (room_id, id);
-- A reply's parent lives in the same room.
ALTER TABLE messages ADD CONSTRAINT messages_room_id_reply_to_fkey
    FOREIGN KEY (room_id, reply_to) REFERENCES messages (room_id, id);
ALTER TABLE jobs ADD CONSTRAINT jobs_room_id_message_id_fkey
    FOREIGN KEY (room_id, message_id) REFERENCES messages (room_id, id) ON DELETE CASCADE;
-- One job per (runtime, message), the message named by room and id.
ALTER TABLE jobs DROP CONSTRAINT jobs_runtime_id_message_id_key;
ALTER TABLE jobs ADD CONSTRAINT jobs_runtime_id_room_id_message_id_key
    UNIQUE (runtime_id, room_id, message_id);
-- The reply a completion wrote, by room and id (the job's room).
ALTER TABLE completions ADD COLUMN reply_room_id uuid;
UPDATE completions c SET reply_room_id = j.room_id
    FROM jobs j WHERE j.id = c.job_id AND c.reply_message_id IS NOT NULL;
ALTER TABLE completions ADD CONSTRAINT completions_reply_check
    CHECK ((reply_room_id IS NULL) = (reply_message_id IS NULL));
ALTER TABLE completions ADD CONSTRAINT completions_reply_fkey
    FOREIGN KEY (reply_room_id, reply_message_id) REFERENCES messages (room_id, id);
