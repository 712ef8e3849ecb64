-- +goose Up
-- A doctor's line in order: offers scan it for the first waiters, and a
-- waiter's position counts those ahead.
CREATE UNIQUE INDEX clinic_waitlist_entries_line_idx ON clinic_waitlist_entries (clinic_id, doctor_id, seq);

-- +goose Down
DROP INDEX clinic_waitlist_entries_line_idx;
