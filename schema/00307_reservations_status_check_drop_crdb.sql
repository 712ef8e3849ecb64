-- +goose Up
-- CockroachDB's name for the column CHECK of 00005 (see 00306).
ALTER TABLE reservations DROP CONSTRAINT IF EXISTS check_status;

-- +goose Down
SELECT 1;
