-- +goose Up
ALTER TABLE appointments ADD COLUMN contact_phone TEXT;

-- +goose Down
ALTER TABLE appointments DROP COLUMN contact_phone;
