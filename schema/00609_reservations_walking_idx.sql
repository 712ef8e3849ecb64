-- +goose Up
-- The walk resumer finds stays left walking (a lost or slow saga step).
CREATE INDEX reservations_walking_idx ON reservations (home_region, updated_at) WHERE status = 'walking';

-- +goose Down
DROP INDEX reservations_walking_idx;
