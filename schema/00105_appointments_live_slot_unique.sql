-- +goose Up
-- The last fence of the invariant: one live appointment per slot.
CREATE UNIQUE INDEX appointments_one_live_per_slot ON appointments (clinic_id, slot_id) WHERE status IN ('held', 'confirmed');

-- +goose Down
DROP INDEX appointments_one_live_per_slot;
