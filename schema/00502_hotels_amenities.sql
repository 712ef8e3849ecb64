-- +goose Up
-- Amenity codes (wifi, pool, …), lower case, sorted; NULL means none.
ALTER TABLE hotels ADD COLUMN amenities TEXT[];

-- +goose Down
ALTER TABLE hotels DROP COLUMN amenities;
