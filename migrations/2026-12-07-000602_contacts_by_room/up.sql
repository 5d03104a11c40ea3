-- A page of one identity's contacts is a range of each side's index in
-- direct-room order (`GET /v1/contacts?after=ROOM`), so it reads what it
-- returns however many contacts the identity has.
CREATE INDEX contacts_a_room_idx ON contacts (identity_a, room_id);
CREATE INDEX contacts_b_room_idx ON contacts (identity_b, room_id);
DROP INDEX contacts_b_idx;
