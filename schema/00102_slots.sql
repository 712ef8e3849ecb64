-- +goose Up
-- One row per bookable slot. A slot is taken by one conditional UPDATE
-- (status = 'open' OR a held slot whose hold_expires_at < now()); a lapsed
-- hold is open for everyone without any sweeper. appointment_id names the
-- appointment occupying the slot (held or booked), held_by its guest.
-- The UNIQUE (clinic, doctor, starts_at) makes materialization idempotent.
CREATE TABLE slots (
    clinic_id       UUID        NOT NULL,
    slot_id         UUID        NOT NULL,
    home_region     TEXT        NOT NULL,
    doctor_id       UUID        NOT NULL,
    starts_at       TIMESTAMPTZ NOT NULL,
    ends_at         TIMESTAMPTZ NOT NULL,
    local_date      DATE        NOT NULL,
    status          TEXT        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'held', 'booked', 'blocked')),
    held_by         TEXT,
    hold_expires_at TIMESTAMPTZ,
    appointment_id  UUID,
    version         INT8        NOT NULL DEFAULT 1,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (clinic_id, slot_id),
    CONSTRAINT slots_doctor_start_unique UNIQUE (clinic_id, doctor_id, starts_at),
    CONSTRAINT slots_ends_after_start CHECK (ends_at > starts_at),
    CONSTRAINT slots_occupied_has_holder CHECK (
        (status IN ('held', 'booked') AND held_by IS NOT NULL AND appointment_id IS NOT NULL)
        OR (status IN ('open', 'blocked') AND held_by IS NULL AND appointment_id IS NULL)),
    CONSTRAINT slots_held_has_expiry CHECK (status <> 'held' OR hold_expires_at IS NOT NULL)
);

-- +goose Down
DROP TABLE slots;
