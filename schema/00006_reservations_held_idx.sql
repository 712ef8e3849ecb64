-- +goose Up
-- The expiry sweeper scans only live holds, oldest expiry first.
CREATE INDEX reservations_held_expiry_idx ON reservations (hold_expires_at) WHERE status = 'held';

-- +goose Down
DROP INDEX reservations_held_expiry_idx;
