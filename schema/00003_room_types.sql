-- +goose Up
CREATE TABLE room_types (
    hotel_id            UUID        NOT NULL,
    room_type_id        UUID        NOT NULL,
    home_region         TEXT        NOT NULL,
    name                TEXT        NOT NULL,
    max_guests          INT4        NOT NULL CHECK (max_guests >= 1),
    price_cents         INT8        NOT NULL CHECK (price_cents >= 0),
    currency            TEXT        NOT NULL,
    overbooking_pct     INT4        NOT NULL DEFAULT 0 CHECK (overbooking_pct BETWEEN 0 AND 25),
    -- When set, a rolling job keeps nights loaded a year ahead with this many rooms.
    default_total_rooms INT4        CHECK (default_total_rooms >= 0),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (hotel_id, room_type_id)
);

-- +goose Down
DROP TABLE room_types;
