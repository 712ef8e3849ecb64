-- +goose Up
-- The freeing events the clinic waitlist consumer has applied to a doctor's
-- line, written in the transaction that made the offers: a redelivered or
-- replayed event offers nothing twice.
CREATE TABLE clinic_waitlist_events (
    clinic_id    UUID        NOT NULL,
    doctor_id    UUID        NOT NULL,
    event_id     UUID        NOT NULL,
    home_region  TEXT        NOT NULL,
    offers       INT4        NOT NULL,
    processed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (clinic_id, doctor_id, event_id)
);

-- +goose Down
DROP TABLE clinic_waitlist_events;
