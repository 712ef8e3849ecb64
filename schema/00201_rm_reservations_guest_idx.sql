-- +goose Up
-- The partner API's keyset: a guest's items by (sort_at, kind, partition_id, id).
CREATE INDEX rm_reservations_guest_idx ON rm_reservations (guest_id, sort_at, kind, partition_id, id);

-- +goose Down
DROP INDEX rm_reservations_guest_idx;
