-- +goose Up
-- The clinic waitlist entry a held appointment was offered to (NULL for a
-- hold the patient made): its confirmation, cancellation or expiry settles
-- the entry.
ALTER TABLE appointments ADD COLUMN waitlist_entry_id UUID;

-- +goose Down
ALTER TABLE appointments DROP COLUMN waitlist_entry_id;
