-- +goose Up
-- The physical rooms of a room type. Guests book types; check-in assigns one
-- of these for every night of the stay (room_nights).
CREATE TABLE rooms (
    hotel_id     UUID        NOT NULL,
    room_id      UUID        NOT NULL,
    home_region  TEXT        NOT NULL,
    room_type_id UUID        NOT NULL,
    number       TEXT        NOT NULL,
    floor        INT4        NOT NULL,
    features     TEXT[]      NOT NULL DEFAULT '{}',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (hotel_id, room_id)
);

-- +goose Down
DROP TABLE rooms;
