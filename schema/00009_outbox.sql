-- +goose Up
-- Transactional outbox: every state change appends its event here in the
-- same transaction; the relay publishes and marks rows sent after the PubAck.
CREATE TABLE outbox (
    partition_id      UUID        NOT NULL,
    event_id          UUID        NOT NULL,
    home_region       TEXT        NOT NULL,
    kind              TEXT        NOT NULL,
    event_type        TEXT        NOT NULL,
    aggregate_id      UUID        NOT NULL,
    aggregate_version INT8        NOT NULL,
    -- position of the event within its transaction, to keep a partition's events in order.
    seq               INT4        NOT NULL DEFAULT 0,
    payload           JSONB       NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at           TIMESTAMPTZ,
    PRIMARY KEY (partition_id, event_id)
);

-- +goose Down
DROP TABLE outbox;
