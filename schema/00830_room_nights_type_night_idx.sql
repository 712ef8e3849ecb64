-- +goose Up
-- The rooms of a type taken on a stay's nights, read by the check-in's room
-- choice (and the out-of-order counts) without touching the rooms' other
-- nights or the other types: room_id is in the key so the read is
-- index-only. Without it the choice probed every room of the type, assigned
-- ones first (docs/PERFORMANCE.md, "Check-in morning with walks").
CREATE INDEX room_nights_type_night_idx ON room_nights (hotel_id, room_type_id, night, room_id);

-- +goose Down
DROP INDEX room_nights_type_night_idx;
