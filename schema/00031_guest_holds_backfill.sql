-- +goose Up
-- Holds made before guest_holds existed are counted, so that their confirm,
-- cancel or expiry lowers a row that holds them.
INSERT INTO guest_holds (hotel_id, guest_id, home_region, holds, rooms)
SELECT hotel_id, guest_id, min(home_region), count(*)::INT4, sum(quantity)::INT4
FROM reservations WHERE status = 'held'
GROUP BY hotel_id, guest_id;

-- +goose Down
DELETE FROM guest_holds;
