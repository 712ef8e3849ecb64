-- +goose Up
-- The payment provider's event ids, deduplicated in their own key space:
-- clients' Idempotency-Keys live in idempotency_keys and can never collide
-- with (or squat) an event id. The row is written in the same transaction as
-- the event's effect, exactly like an Idempotency-Key (docs/adr/0005).
CREATE TABLE webhook_events (
    event_id        TEXT        NOT NULL,
    partition_id    UUID        NOT NULL,
    home_region     TEXT        NOT NULL,
    request_hash    TEXT        NOT NULL,
    response_status INT4,
    response_body   BYTEA,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id)
);

-- +goose Down
DROP TABLE webhook_events;
