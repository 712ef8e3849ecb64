-- +goose Up
-- CockroachDB's name for the column CHECK of 00104 (see 00620).
ALTER TABLE appointments DROP CONSTRAINT IF EXISTS check_status;

-- +goose Down
SELECT 1;
