-- +goose Up
-- The audit row of every confirmation: how it was paid for (online, the
-- provider's webhook, at the desk, or nothing was due), the reference, the
-- amount and currency the decision compared, who confirmed and when. It is
-- written in the confirming transaction, so no confirmation lacks one.
CREATE TABLE payment_confirmations (
    partition_id   UUID        NOT NULL,
    reservation_id UUID        NOT NULL,
    home_region    TEXT        NOT NULL,
    kind           TEXT        NOT NULL CHECK (kind IN ('hotel', 'clinic')),
    method         TEXT        NOT NULL CHECK (method IN ('online', 'webhook', 'desk', 'none')),
    payment_ref    TEXT        NOT NULL,
    amount_cents   INT8        NOT NULL,
    currency       TEXT        NOT NULL,
    actor_subject  TEXT        NOT NULL,
    actor_role     TEXT        NOT NULL,
    confirmed_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, reservation_id)
);

-- +goose Down
DROP TABLE payment_confirmations;
