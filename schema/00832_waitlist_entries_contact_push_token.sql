-- +goose Up
-- A waiter's device token for push notifications (FCM), beside the e-mail and
-- phone: the offer's hold copies the entry's contacts, and an offer is the
-- message a waiter most needs at once.
ALTER TABLE waitlist_entries ADD COLUMN contact_push_token TEXT;

-- +goose Down
ALTER TABLE waitlist_entries DROP COLUMN contact_push_token;
