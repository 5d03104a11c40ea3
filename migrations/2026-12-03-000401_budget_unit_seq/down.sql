DROP INDEX budget_units_seq_idx;
ALTER TABLE budget_units DROP COLUMN seq;
