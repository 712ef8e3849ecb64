-- +goose Up
-- The freeing events the waitlist consumer has applied, written in the
-- transaction that made the offers: a redelivered or replayed event offers
-- nothing twice.
CREATE TABLE waitlist_events (
    hotel_id     UUID        NOT NULL,
    event_id     UUID        NOT NULL,
    home_region  TEXT        NOT NULL,
    offers       INT4        NOT NULL,
    processed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (hotel_id, event_id)
);

-- +goose Down
DROP TABLE waitlist_events;
