-- +goose Up
-- One row per (hotel, guest): how many live holds the guest has in the hotel
-- and how many rooms they take together. "Live" means status 'held' (a hold
-- whose expiry passed counts until the sweeper expires it, seconds later);
-- confirmed bookings are paid for and do not count. A hold raises the row
-- with one conditional write whose WHERE carries the configured limits, so
-- parallel holds of one guest queue on the row and can never pass them;
-- confirm, cancel and the sweeper lower it in the transaction that changes
-- the reservation's status. The CHECK is the last fence against drift.
CREATE TABLE guest_holds (
    hotel_id    UUID NOT NULL,
    guest_id    TEXT NOT NULL,
    home_region TEXT NOT NULL,
    holds       INT4 NOT NULL DEFAULT 0,
    rooms       INT4 NOT NULL DEFAULT 0,
    PRIMARY KEY (hotel_id, guest_id),
    CONSTRAINT guest_holds_non_negative CHECK (holds >= 0 AND rooms >= 0)
);

-- +goose Down
DROP TABLE guest_holds;
