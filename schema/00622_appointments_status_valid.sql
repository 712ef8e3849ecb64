-- +goose Up
ALTER TABLE appointments ADD CONSTRAINT appointments_status_valid
    CHECK (status IN ('held', 'confirmed', 'cancelled', 'expired', 'no_show', 'arrived', 'completed'));

-- +goose Down
ALTER TABLE appointments DROP CONSTRAINT appointments_status_valid;
