-- +goose Up
-- One row per room and night that the room is not free: assigned to a stay
-- (reservation_id) or out of order (out_of_order_reason). The primary key is
-- the second invariant — a room is never given to two stays on one night —
-- as a plain unique key, which CockroachDB enforces as PostgreSQL does (no
-- exclusion constraint over date ranges).
CREATE TABLE room_nights (
    hotel_id            UUID NOT NULL,
    room_id             UUID NOT NULL,
    night               DATE NOT NULL,
    home_region         TEXT NOT NULL,
    room_type_id        UUID NOT NULL,
    reservation_id      UUID,
    out_of_order_reason TEXT,
    PRIMARY KEY (hotel_id, room_id, night),
    CONSTRAINT room_nights_one_use CHECK ((reservation_id IS NULL) <> (out_of_order_reason IS NULL))
);

-- +goose Down
DROP TABLE room_nights;
