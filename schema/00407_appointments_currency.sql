-- +goose Up
ALTER TABLE appointments ADD COLUMN currency TEXT;

-- +goose Down
ALTER TABLE appointments DROP COLUMN currency;
