-- +goose Up
-- A guest's live appointments of a clinic, keyed by clinic and guest in one
-- value: what the per-guest limits count before every appointment hold
-- (countClinicGuestSQL, liveElsewhereSQL, the window take's check), which
-- name this expression and so no other index. The clinic's id as text has
-- a fixed length, so the key equals another only for the same clinic and
-- guest. With a plain (clinic_id, guest_id) index the planner had other
-- indexes on clinic_id to choose from, at the same cost while the table is
-- small: a new deployment's first opening plans these statements on an
-- almost empty table, and the prepared statement's generic plan made then
-- is kept for the connection's life, so it went on scanning the clinic's
-- live appointments (appointments_one_live_per_slot) or a doctor's day
-- (appointments_doctor_day_idx): 690 buffers per count after 2,000 holds of
-- one clinic (docs/PERFORMANCE.md, "A guest's count by a key of its own").
CREATE INDEX appointments_live_guest_idx ON appointments ((clinic_id::TEXT || guest_id)) WHERE status IN ('held', 'confirmed');

-- +goose Down
DROP INDEX appointments_live_guest_idx;
