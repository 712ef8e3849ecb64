-- +goose Up
-- Refunds made by the development payment provider, keyed by the idempotency
-- key the refunds consumer sends (the refund_requested event id).
CREATE TABLE payment_refunds (
    idempotency_key TEXT        NOT NULL PRIMARY KEY,
    refund_id       UUID        NOT NULL,
    kind            TEXT        NOT NULL,
    partition_id    TEXT        NOT NULL,
    reservation_id  TEXT        NOT NULL,
    payment_ref     TEXT        NOT NULL,
    amount_cents    INT8        NOT NULL,
    currency        TEXT        NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE payment_refunds;
