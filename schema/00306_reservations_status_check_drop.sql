-- +goose Up
-- The column CHECK of 00005 is named by the engine: this is PostgreSQL's
-- name, 00307 drops CockroachDB's; 00308 adds the statuses of the stay.
ALTER TABLE reservations DROP CONSTRAINT IF EXISTS reservations_status_check;

-- +goose Down
SELECT 1;
