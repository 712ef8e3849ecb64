-- +goose Up
-- What a prepaid appointment of the doctor costs; NULL: no online payment
-- (a prepaid appointment is then confirmed at the desk).
ALTER TABLE doctors ADD COLUMN price_cents INT8;

-- +goose Down
ALTER TABLE doctors DROP COLUMN price_cents;
