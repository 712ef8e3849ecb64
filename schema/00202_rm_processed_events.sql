-- +goose Up
-- Event ids a consumer has applied, written in the same transaction as the
-- effect, so a redelivered event changes nothing.
CREATE TABLE rm_processed_events (
    consumer     TEXT        NOT NULL,
    event_id     TEXT        NOT NULL,
    processed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

-- +goose Down
DROP TABLE rm_processed_events;
