-- +goose Up
-- Optional location of the hotel (WGS 84 degrees), for geographic search.
ALTER TABLE hotels ADD COLUMN latitude FLOAT8;

-- +goose Down
ALTER TABLE hotels DROP COLUMN latitude;
