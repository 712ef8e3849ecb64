-- +goose Up
-- No statement of the booking service reads reservations by guest alone: a
-- guest's reservations are the read model's (rm_reservations_guest_idx), the
-- per-guest hold limits count in guest_holds, and verify groups the whole
-- table. The index cost every hold an entry, and every status change of a
-- stay another (confirm, cancel and expiry are not HOT updates: status is in
-- reservations_held_expiry_idx's predicate) (docs/adr/0023-database-work-per-hold.md).
DROP INDEX reservations_guest_idx;

-- +goose Down
CREATE INDEX reservations_guest_idx ON reservations (guest_id);
