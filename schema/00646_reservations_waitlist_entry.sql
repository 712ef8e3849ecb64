-- +goose Up
-- The waitlist entry a held reservation was offered to (NULL for a hold the
-- guest made): its confirmation, cancellation or expiry settles the entry.
ALTER TABLE reservations ADD COLUMN waitlist_entry_id UUID;

-- +goose Down
ALTER TABLE reservations DROP COLUMN waitlist_entry_id;
