-- +goose Up
-- The per-guest limit (one live appointment per doctor per day).
CREATE INDEX appointments_guest_day_idx ON appointments (clinic_id, doctor_id, guest_id, local_date);

-- +goose Down
DROP INDEX appointments_guest_day_idx;
