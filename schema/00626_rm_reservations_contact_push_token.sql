-- +goose Up
-- The view carries the push token as it carries the e-mail and phone: the
-- reminder scan reads its contacts there.
ALTER TABLE rm_reservations ADD COLUMN contact_push_token TEXT;

-- +goose Down
ALTER TABLE rm_reservations DROP COLUMN contact_push_token;
