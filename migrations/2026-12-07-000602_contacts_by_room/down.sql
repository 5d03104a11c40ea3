CREATE INDEX contacts_b_idx ON contacts (identity_b);
DROP INDEX contacts_b_room_idx;
DROP INDEX contacts_a_room_idx;
