-- +goose Up
CREATE TABLE reservations (
    hotel_id          UUID        NOT NULL,
    reservation_id    UUID        NOT NULL,
    home_region       TEXT        NOT NULL,
    room_type_id      UUID        NOT NULL,
    guest_id          TEXT        NOT NULL,
    check_in          DATE        NOT NULL,
    check_out         DATE        NOT NULL,
    quantity          INT4        NOT NULL CHECK (quantity >= 1),
    status            TEXT        NOT NULL CHECK (status IN ('held', 'confirmed', 'cancelled', 'expired')),
    hold_expires_at   TIMESTAMPTZ NOT NULL,
    total_price_cents INT8        NOT NULL,
    currency          TEXT        NOT NULL,
    payment_ref       TEXT,
    contact_email     TEXT,
    contact_phone     TEXT,
    version           INT8        NOT NULL DEFAULT 1,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (hotel_id, reservation_id),
    CHECK (check_out > check_in)
);

-- +goose Down
DROP TABLE reservations;
