-- +goose Up
-- Its only readers were the per-guest counts, which appointments_live_guest_idx
-- now serves (00920); one index entry less for every appointment.
DROP INDEX appointments_guest_day_idx;

-- +goose Down
CREATE INDEX appointments_guest_day_idx ON appointments (clinic_id, doctor_id, guest_id, local_date);
