-- +goose Up
-- The first night an early departure or a no-show gave back: the
-- reservation occupies [check_in, COALESCE(released_from, check_out)).
ALTER TABLE reservations ADD COLUMN released_from DATE;

-- +goose Down
ALTER TABLE reservations DROP COLUMN released_from;
