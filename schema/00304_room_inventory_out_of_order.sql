-- +goose Up
-- Rooms of the type out of order on the night; the sellable limit is
-- folded from total_rooms - out_of_order on every write.
ALTER TABLE room_inventory ADD COLUMN out_of_order INT4 NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE room_inventory DROP COLUMN out_of_order;
