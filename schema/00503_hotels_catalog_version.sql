-- +goose Up
-- Bumped by every change of the hotel or its room types; the full-state
-- hotel.catalog event carries it, so a consumer never applies an older
-- catalog over a newer one.
ALTER TABLE hotels ADD COLUMN catalog_version INT8 NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE hotels DROP COLUMN catalog_version;
