-- +goose Up
-- The target hotel's record of each walk it was asked to take (a row of the
-- target's partition): the relocation saga's step there is idempotent by
-- walk_id, and a replayed request answers with the outcome recorded here
-- (held: the stay walk_id exists; refused: no availability) instead of
-- deciding again.
CREATE TABLE walk_outcomes (
    hotel_id                UUID        NOT NULL,
    walk_id                 UUID        NOT NULL,
    home_region             TEXT        NOT NULL,
    outcome                 TEXT        NOT NULL CHECK (outcome IN ('held', 'refused')),
    from_hotel_id           UUID        NOT NULL,
    from_reservation_id     UUID        NOT NULL,
    amount_cents            INT8        NOT NULL DEFAULT 0,
    currency                TEXT        NOT NULL DEFAULT '',
    reason                  TEXT        NOT NULL DEFAULT '',
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (hotel_id, walk_id)
);

-- +goose Down
DROP TABLE walk_outcomes;
