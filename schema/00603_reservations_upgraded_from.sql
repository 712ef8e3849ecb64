-- +goose Up
-- The room type a stay was booked as before the desk upgraded it (free of
-- charge) to room_type_id, because no room of the booked type was free.
ALTER TABLE reservations ADD COLUMN upgraded_from UUID;

-- +goose Down
ALTER TABLE reservations DROP COLUMN upgraded_from;
