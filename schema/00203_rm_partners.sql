-- +goose Up
-- Partner API keys: only the SHA-256 of a key is stored; the key is shown once.
CREATE TABLE rm_partners (
    partner_id  UUID        NOT NULL PRIMARY KEY,
    name        TEXT        NOT NULL,
    key_hash    TEXT        NOT NULL UNIQUE,
    key_prefix  TEXT        NOT NULL,
    scope       TEXT        NOT NULL DEFAULT 'guests.reservations:read',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at  TIMESTAMPTZ
);

-- +goose Down
DROP TABLE rm_partners;
