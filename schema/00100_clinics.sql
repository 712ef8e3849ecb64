-- +goose Up
-- A clinic is a partition of the clinic kind; its weekly templates are in
-- its IANA time zone, its slots are stored as instants.
CREATE TABLE clinics (
    clinic_id   UUID        NOT NULL,
    home_region TEXT        NOT NULL,
    name        TEXT        NOT NULL,
    timezone    TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (clinic_id)
);

-- +goose Down
DROP TABLE clinics;
