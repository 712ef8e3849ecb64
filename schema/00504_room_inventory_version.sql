-- +goose Up
-- Bumped by every change of the night (rooms taken, given back, limit set);
-- inventory.changed events carry it per night, so the search summary never
-- applies an older count over a newer one.
ALTER TABLE room_inventory ADD COLUMN version INT8 NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE room_inventory DROP COLUMN version;
