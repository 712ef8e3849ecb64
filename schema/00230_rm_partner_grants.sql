-- +goose Up
-- Which partners a guest let read their reservations. A partner key reads a
-- guest only while a row here names both; the guest grants and revokes with
-- their own token.
CREATE TABLE rm_partner_grants (
    guest_id   TEXT        NOT NULL,
    partner_id UUID        NOT NULL,
    granted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (guest_id, partner_id)
);

-- +goose Down
DROP TABLE rm_partner_grants;
