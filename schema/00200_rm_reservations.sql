-- +goose Up
-- The read model's per-guest view of every reservation and appointment of
-- every partition and region, projected from the event stream. Not a
-- partition table: it is keyed by guest, and written by the readmodel only.
CREATE TABLE rm_reservations (
    kind          TEXT        NOT NULL,
    partition_id  TEXT        NOT NULL,
    id            TEXT        NOT NULL,
    guest_id      TEXT        NOT NULL,
    status        TEXT        NOT NULL,
    start_at      TEXT        NOT NULL,
    end_at        TEXT        NOT NULL,
    sort_at       TIMESTAMPTZ NOT NULL,
    title         TEXT        NOT NULL,
    contact_email TEXT,
    contact_phone TEXT,
    version       INT8        NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    event_time    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (kind, partition_id, id)
);

-- +goose Down
DROP TABLE rm_reservations;
