-- +goose Up
-- The front desk's arrivals of a day, and the no-show job's candidates.
CREATE INDEX reservations_arrivals_idx ON reservations (hotel_id, check_in);

-- +goose Down
DROP INDEX reservations_arrivals_idx;
