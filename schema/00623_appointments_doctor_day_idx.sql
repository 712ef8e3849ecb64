-- +goose Up
-- The reception's day list of a doctor.
CREATE INDEX appointments_doctor_day_idx ON appointments (clinic_id, doctor_id, local_date);

-- +goose Down
DROP INDEX appointments_doctor_day_idx;
