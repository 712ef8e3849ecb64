-- +goose Up
-- A guest's entries in a hotel (the per-guest cap on waiting entries).
CREATE INDEX waitlist_entries_guest_idx ON waitlist_entries (hotel_id, guest_id);

-- +goose Down
DROP INDEX waitlist_entries_guest_idx;
