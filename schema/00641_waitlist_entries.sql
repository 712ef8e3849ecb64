-- +goose Up
-- A guest waiting for one room of a type for a stay. seq is the place in the
-- line (from waitlist_queues.last_seq). status: waiting, offered (a held
-- reservation, reservation_id, was made for the waiter and waits for its
-- confirmation), booked, lapsed (the offer expired), declined (the offer was
-- cancelled) or left. passed_at is when an offer last passed the waiter over
-- because a per-guest limit refused them the hold.
CREATE TABLE waitlist_entries (
    hotel_id         UUID        NOT NULL,
    entry_id         UUID        NOT NULL,
    home_region      TEXT        NOT NULL,
    room_type_id     UUID        NOT NULL,
    guest_id         TEXT        NOT NULL,
    check_in         DATE        NOT NULL,
    check_out        DATE        NOT NULL,
    quantity         INT4        NOT NULL DEFAULT 1,
    seq              INT8        NOT NULL,
    status           TEXT        NOT NULL,
    reservation_id   UUID,
    offered_at       TIMESTAMPTZ,
    passed_at        TIMESTAMPTZ,
    contact_email    TEXT,
    contact_phone    TEXT,
    version          INT8        NOT NULL DEFAULT 1,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (hotel_id, entry_id),
    CONSTRAINT waitlist_entries_status CHECK (status IN ('waiting', 'offered', 'booked', 'lapsed', 'declined', 'left')),
    CONSTRAINT waitlist_entries_stay CHECK (check_out > check_in AND quantity = 1),
    CONSTRAINT waitlist_entries_offer CHECK ((status = 'waiting' OR status = 'left') = (reservation_id IS NULL))
);

-- +goose Down
DROP TABLE waitlist_entries;
