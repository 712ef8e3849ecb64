-- +goose Up
-- An offer is one reservation, and a reservation is the offer of at most one
-- waiter: the last fence against offering one hold twice.
CREATE UNIQUE INDEX waitlist_entries_reservation_idx ON waitlist_entries (hotel_id, reservation_id);

-- +goose Down
DROP INDEX waitlist_entries_reservation_idx;
