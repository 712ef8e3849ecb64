-- +goose Up
ALTER TABLE doctors ADD COLUMN currency TEXT;

-- +goose Down
ALTER TABLE doctors DROP COLUMN currency;
