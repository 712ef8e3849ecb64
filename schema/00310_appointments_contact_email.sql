-- +goose Up
-- Where an appointment's notifications go (as a hotel reservation's).
ALTER TABLE appointments ADD COLUMN contact_email TEXT;

-- +goose Down
ALTER TABLE appointments DROP COLUMN contact_email;
