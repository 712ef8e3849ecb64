-- +goose Up
-- weekly is the template [{weekday, start, end}] in the clinic's local time;
-- materialized_through is the first local date the rolling job has not yet
-- turned into slots.
CREATE TABLE doctors (
    clinic_id            UUID        NOT NULL,
    doctor_id            UUID        NOT NULL,
    home_region          TEXT        NOT NULL,
    name                 TEXT        NOT NULL,
    slot_minutes         INT4        NOT NULL CHECK (slot_minutes BETWEEN 5 AND 480),
    prepay_required      BOOL        NOT NULL DEFAULT false,
    weekly               JSONB       NOT NULL,
    materialized_through DATE,
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (clinic_id, doctor_id)
);

-- +goose Down
DROP TABLE doctors;
