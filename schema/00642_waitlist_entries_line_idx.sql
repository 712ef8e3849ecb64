-- +goose Up
-- The line of one waitlist in order: offers scan it for the first waiters,
-- and a waiter's position counts those ahead.
CREATE UNIQUE INDEX waitlist_entries_line_idx ON waitlist_entries (hotel_id, room_type_id, seq);

-- +goose Down
DROP INDEX waitlist_entries_line_idx;
