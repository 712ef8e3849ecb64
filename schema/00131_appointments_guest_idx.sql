-- +goose Up
-- The per-guest limits count a guest's appointments in a clinic.
CREATE INDEX appointments_clinic_guest_idx ON appointments (clinic_id, guest_id);

-- +goose Down
DROP INDEX appointments_clinic_guest_idx;
