-- +goose Up
-- The chain a hotel belongs to (optional): a walked guest is relocated only
-- to another hotel of the same chain in the same city.
ALTER TABLE hotels ADD COLUMN chain TEXT;

-- +goose Down
ALTER TABLE hotels DROP COLUMN chain;
