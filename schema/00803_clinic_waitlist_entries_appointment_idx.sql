-- +goose Up
-- An offer is one appointment, and an appointment is the offer of at most
-- one waiter: the last fence against offering one hold twice.
CREATE UNIQUE INDEX clinic_waitlist_entries_appointment_idx ON clinic_waitlist_entries (clinic_id, appointment_id);

-- +goose Down
DROP INDEX clinic_waitlist_entries_appointment_idx;
