-- +goose Up
-- Open slots of a doctor by day: the slot list, alternatives and "any slot
-- in this window".
CREATE INDEX slots_open_doctor_day_idx ON slots (clinic_id, doctor_id, local_date, starts_at) WHERE status = 'open';

-- +goose Down
DROP INDEX slots_open_doctor_day_idx;
