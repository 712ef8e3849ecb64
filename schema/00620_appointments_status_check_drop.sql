-- +goose Up
-- The column CHECK of 00104 is named by the engine: this is PostgreSQL's
-- name, 00621 drops CockroachDB's; 00622 adds the statuses of the visit.
ALTER TABLE appointments DROP CONSTRAINT IF EXISTS appointments_status_check;

-- +goose Down
SELECT 1;
