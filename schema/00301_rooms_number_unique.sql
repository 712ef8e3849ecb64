-- +goose Up
-- A room number names one room of the hotel.
CREATE UNIQUE INDEX rooms_hotel_number_unique ON rooms (hotel_id, number);

-- +goose Down
DROP INDEX rooms_hotel_number_unique;
