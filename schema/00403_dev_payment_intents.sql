-- +goose Up
-- Payment intents of the development payment provider (never used with a
-- real provider): what `make run` and the end-to-end tests pay through.
CREATE TABLE dev_payment_intents (
    intent_id       TEXT        NOT NULL PRIMARY KEY,
    idempotency_key TEXT        NOT NULL UNIQUE,
    client_secret   TEXT        NOT NULL,
    kind            TEXT        NOT NULL,
    partition_id    TEXT        NOT NULL,
    reservation_id  TEXT        NOT NULL,
    amount_cents    INT8        NOT NULL CHECK (amount_cents > 0),
    currency        TEXT        NOT NULL,
    status          TEXT        NOT NULL CHECK (status IN ('requires_payment', 'succeeded', 'failed')),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE dev_payment_intents;
