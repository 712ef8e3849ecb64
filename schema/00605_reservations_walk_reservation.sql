-- +goose Up
ALTER TABLE reservations ADD COLUMN walk_reservation_id UUID;

-- +goose Down
ALTER TABLE reservations DROP COLUMN walk_reservation_id;
