-- +goose Up
-- One lock row per (clinic, doctor, guest, local day). A write that may give
-- the guest a new live appointment on that day locks this row first (insert
-- or touch), then counts the guest's live appointments: parallel requests
-- of one guest serialize here, so none can beat the one-per-day limit.
CREATE TABLE clinic_guest_days (
    clinic_id   UUID        NOT NULL,
    doctor_id   UUID        NOT NULL,
    guest_id    TEXT        NOT NULL,
    local_date  DATE        NOT NULL,
    home_region TEXT        NOT NULL,
    touched_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (clinic_id, doctor_id, guest_id, local_date)
);

-- +goose Down
DROP TABLE clinic_guest_days;
