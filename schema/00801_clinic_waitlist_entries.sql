-- +goose Up
-- A patient waiting for a slot of a doctor on a day (local_date), or within
-- a time window of that day: window_start/window_end are the instants the
-- slot's start must fall in (the whole local day for a day entry, by_window
-- false). seq is the place in the doctor's line. status: waiting, offered (a
-- held appointment, appointment_id, was made for the waiter), booked,
-- lapsed, declined or left, as for the hotel waitlists; offered_starts is when
-- the offered slot starts (the first-come-first-served audit reads it). passed_at is when an
-- offer last passed the waiter over for a per-patient limit.
CREATE TABLE clinic_waitlist_entries (
    clinic_id      UUID        NOT NULL,
    entry_id       UUID        NOT NULL,
    home_region    TEXT        NOT NULL,
    doctor_id      UUID        NOT NULL,
    guest_id       TEXT        NOT NULL,
    local_date     DATE        NOT NULL,
    window_start   TIMESTAMPTZ NOT NULL,
    window_end     TIMESTAMPTZ NOT NULL,
    by_window      BOOL        NOT NULL,
    seq            INT8        NOT NULL,
    status         TEXT        NOT NULL,
    appointment_id UUID,
    offered_at     TIMESTAMPTZ,
    offered_starts TIMESTAMPTZ,
    passed_at      TIMESTAMPTZ,
    contact_email  TEXT,
    contact_phone  TEXT,
    version        INT8        NOT NULL DEFAULT 1,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (clinic_id, entry_id),
    CONSTRAINT clinic_waitlist_entries_status CHECK (status IN ('waiting', 'offered', 'booked', 'lapsed', 'declined', 'left')),
    CONSTRAINT clinic_waitlist_entries_window CHECK (window_end > window_start),
    CONSTRAINT clinic_waitlist_entries_offer CHECK ((status = 'waiting' OR status = 'left') = (appointment_id IS NULL))
);

-- +goose Down
DROP TABLE clinic_waitlist_entries;
