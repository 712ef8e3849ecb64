-- +goose Up
ALTER TABLE reservations ADD CONSTRAINT reservations_status_valid
    CHECK (status IN ('held', 'confirmed', 'cancelled', 'expired', 'checked_in', 'checked_out', 'no_show'));

-- +goose Down
ALTER TABLE reservations DROP CONSTRAINT reservations_status_valid;
