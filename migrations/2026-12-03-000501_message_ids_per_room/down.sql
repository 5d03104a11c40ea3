-- Only possible while no message id is used in two rooms.
ALTER TABLE completions DROP CONSTRAINT completions_reply_fkey;
ALTER TABLE completions DROP CONSTRAINT completions_reply_check;
ALTER TABLE completions DROP COLUMN reply_room_id;
ALTER TABLE jobs DROP CONSTRAINT jobs_runtime_id_room_id_message_id_key;
ALTER TABLE jobs ADD CONSTRAINT jobs_runtime_id_message_id_key UNIQUE (runtime_id, message_id);
ALTER TABLE jobs DROP CONSTRAINT jobs_room_id_message_id_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_room_id_reply_to_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_pkey;
ALTER TABLE messages ADD CONSTRAINT messages_pkey PRIMARY KEY (id);
ALTER TABLE messages ADD CONSTRAINT messages_room_id_id_key UNIQUE (room_id, id);
ALTER TABLE messages ADD CONSTRAINT messages_room_id_reply_to_fkey
    FOREIGN KEY (room_id, reply_to) REFERENCES messages (room_id, id);
ALTER TABLE jobs ADD CONSTRAINT jobs_room_id_message_id_fkey
    FOREIGN KEY (room_id, message_id) REFERENCES messages (room_id, id) ON DELETE CASCADE;
ALTER TABLE completions ADD CONSTRAINT completions_reply_message_id_fkey
    FOREIGN KEY (reply_message_id) REFERENCES messages (id);
