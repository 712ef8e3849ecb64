-- +goose Up
-- An appointment occupies one slot while live (held or confirmed). The
-- doctor, times and local_date are copied from the slot so that the
-- per-guest limit and reads need no join.
CREATE TABLE appointments (
    clinic_id          UUID        NOT NULL,
    appointment_id     UUID        NOT NULL,
    home_region        TEXT        NOT NULL,
    doctor_id          UUID        NOT NULL,
    slot_id            UUID        NOT NULL,
    guest_id           TEXT        NOT NULL,
    starts_at          TIMESTAMPTZ NOT NULL,
    ends_at            TIMESTAMPTZ NOT NULL,
    local_date         DATE        NOT NULL,
    status             TEXT        NOT NULL CHECK (status IN ('held', 'confirmed', 'cancelled', 'expired', 'no_show')),
    channel            TEXT        NOT NULL CHECK (channel IN ('app', 'web', 'counter')),
    created_by_subject TEXT        NOT NULL,
    created_by_role    TEXT        NOT NULL,
    hold_expires_at    TIMESTAMPTZ,
    payment_ref        TEXT,
    version            INT8        NOT NULL DEFAULT 1,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (clinic_id, appointment_id)
);

-- +goose Down
DROP TABLE appointments;
