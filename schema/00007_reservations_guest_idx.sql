-- +goose Up
CREATE INDEX reservations_guest_idx ON reservations (guest_id);

-- +goose Down
DROP INDEX reservations_guest_idx;
