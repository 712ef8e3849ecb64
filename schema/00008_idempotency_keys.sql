-- +goose Up
-- Written in the same transaction as the effect it guards: the key row is
-- inserted first (a concurrent duplicate waits on it), the response last.
CREATE TABLE idempotency_keys (
    partition_id    UUID        NOT NULL,
    idem_key        TEXT        NOT NULL,
    home_region     TEXT        NOT NULL,
    request_hash    TEXT        NOT NULL,
    response_status INT4,
    response_body   BYTEA,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, idem_key)
);

-- +goose Down
DROP TABLE idempotency_keys;
