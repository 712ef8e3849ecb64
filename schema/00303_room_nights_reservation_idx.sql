-- +goose Up
-- A stay's rooms: read with the reservation, released at departure.
CREATE INDEX room_nights_reservation_idx ON room_nights (hotel_id, reservation_id, night) WHERE reservation_id IS NOT NULL;

-- +goose Down
DROP INDEX room_nights_reservation_idx;
