-- +goose Up
ALTER TABLE reservations ADD COLUMN relocated_from_reservation_id UUID;

-- +goose Down
ALTER TABLE reservations DROP COLUMN relocated_from_reservation_id;
