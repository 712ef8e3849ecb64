-- +goose Up
-- One lock row per (clinic, guest). A hold locks it (insert or touch) before
-- counting the guest's live holds and appointments in the clinic against the
-- per-guest limits: parallel holds of one guest serialize here, so none can
-- pass a limit between the count and the write (clinic holds lapse lazily,
-- so a kept counter could not follow them; the count reads database time).
CREATE TABLE clinic_guests (
    clinic_id   UUID        NOT NULL,
    guest_id    TEXT        NOT NULL,
    home_region TEXT        NOT NULL,
    touched_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (clinic_id, guest_id)
);

-- +goose Down
DROP TABLE clinic_guests;
