-- +goose Up
-- The no-show job's candidates: confirmed appointments by the end of their slot.
CREATE INDEX appointments_confirmed_end_idx ON appointments (home_region, ends_at) WHERE status = 'confirmed';

-- +goose Down
DROP INDEX appointments_confirmed_end_idx;
