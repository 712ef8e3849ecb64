-- +goose Up
ALTER TABLE reservations ADD CONSTRAINT reservations_status_known
    CHECK (status IN ('held', 'confirmed', 'cancelled', 'expired', 'checked_in', 'checked_out', 'no_show', 'walking', 'walked'));

-- +goose Down
ALTER TABLE reservations DROP CONSTRAINT reservations_status_known;
