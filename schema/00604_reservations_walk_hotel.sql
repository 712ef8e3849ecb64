-- +goose Up
-- A walk (relocation) of this stay to a sister hotel: the target hotel and
-- the id of the stay held there (the walk id). Set while walking and once
-- walked; cleared when the walk is undone.
ALTER TABLE reservations ADD COLUMN walk_hotel_id UUID;

-- +goose Down
ALTER TABLE reservations DROP COLUMN walk_hotel_id;
