-- +goose Up
-- The waiting entries of a region: the job that expires lapsed holds of a
-- slot somebody waits for starts from them every few seconds, so it reads
-- the waiting entries, not every entry ever made.
CREATE INDEX clinic_waitlist_entries_waiting_idx ON clinic_waitlist_entries (home_region, clinic_id, doctor_id, local_date) WHERE status = 'waiting';

-- +goose Down
DROP INDEX clinic_waitlist_entries_waiting_idx;
