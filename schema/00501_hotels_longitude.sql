-- +goose Up
ALTER TABLE hotels ADD COLUMN longitude FLOAT8;

-- +goose Down
ALTER TABLE hotels DROP COLUMN longitude;
