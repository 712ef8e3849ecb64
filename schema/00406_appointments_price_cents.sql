-- +goose Up
-- Copied from the doctor when a prepaid appointment is held: the amount its
-- payment must match, fixed for the appointment's life.
ALTER TABLE appointments ADD COLUMN price_cents INT8;

-- +goose Down
ALTER TABLE appointments DROP COLUMN price_cents;
