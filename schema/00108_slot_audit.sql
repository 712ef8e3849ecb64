-- +goose Up
-- Every slot transition, written in the transaction that made it.
CREATE TABLE slot_audit (
    clinic_id      UUID        NOT NULL,
    slot_id        UUID        NOT NULL,
    audit_id       UUID        NOT NULL,
    home_region    TEXT        NOT NULL,
    at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    seq            INT4        NOT NULL DEFAULT 0,
    actor_subject  TEXT        NOT NULL,
    actor_role     TEXT        NOT NULL,
    channel        TEXT        NOT NULL,
    from_status    TEXT        NOT NULL,
    to_status      TEXT        NOT NULL,
    appointment_id UUID,
    PRIMARY KEY (clinic_id, slot_id, audit_id)
);

-- +goose Down
DROP TABLE slot_audit;
