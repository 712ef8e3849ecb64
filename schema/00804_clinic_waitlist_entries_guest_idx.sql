-- +goose Up
-- A patient's entries in a clinic (the cap on waiting entries, "already
-- waiting").
CREATE INDEX clinic_waitlist_entries_guest_idx ON clinic_waitlist_entries (clinic_id, guest_id);

-- +goose Down
DROP INDEX clinic_waitlist_entries_guest_idx;
