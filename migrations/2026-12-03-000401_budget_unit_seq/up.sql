-- Each budget unit carries its runtime's running count of grants, so a
-- claim reads the units in the rolling hour as a difference of two index
-- lookups (the newest unit, and the newest unit before the window) instead
-- of counting the rows. Claims of a runtime are serialised by its row lock
-- and stamp units with clock_timestamp(), so seq and granted_at rise
-- together and the difference is exact.
ALTER TABLE budget_units ADD COLUMN seq bigint;
UPDATE budget_units u SET seq = n.seq
FROM (
    SELECT id, row_number() OVER (PARTITION BY runtime_id ORDER BY granted_at, id) AS seq
    FROM budget_units
) n
WHERE n.id = u.id;
ALTER TABLE budget_units ALTER COLUMN seq SET NOT NULL;
ALTER TABLE budget_units ADD CONSTRAINT budget_units_seq_check CHECK (seq >= 1);
CREATE UNIQUE INDEX budget_units_seq_idx ON budget_units (runtime_id, seq);
