-- +goose Up
-- One counter per (hotel, room type, night). The CHECK is the last fence of
-- the invariant: held + confirmed rooms never exceed the sellable limit.
CREATE TABLE room_inventory (
    hotel_id     UUID NOT NULL,
    room_type_id UUID NOT NULL,
    night        DATE NOT NULL,
    home_region  TEXT NOT NULL,
    total_rooms  INT4 NOT NULL CHECK (total_rooms >= 0),
    -- floor(total_rooms * (100 + overbooking_pct) / 100), folded in on write.
    sell_limit   INT4 NOT NULL,
    reserved     INT4 NOT NULL DEFAULT 0,
    PRIMARY KEY (hotel_id, room_type_id, night),
    CONSTRAINT room_inventory_reserved_within_limit CHECK (reserved >= 0 AND reserved <= sell_limit)
);

-- +goose Down
DROP TABLE room_inventory;
