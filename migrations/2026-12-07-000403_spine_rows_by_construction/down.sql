ALTER TABLE attempts SET (fillfactor = 60);
ALTER TABLE attempts ADD CONSTRAINT attempts_reply_fkey FOREIGN KEY (reply_room_id, reply_message_id)
    REFERENCES messages (room_id, id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE attempts ADD CONSTRAINT attempts_job_id_fkey FOREIGN KEY (job_id)
    REFERENCES jobs (id) ON DELETE CASCADE;
