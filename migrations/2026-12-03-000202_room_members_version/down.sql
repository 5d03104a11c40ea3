ALTER TABLE rooms DROP COLUMN members_version;
