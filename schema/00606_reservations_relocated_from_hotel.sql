-- +goose Up
-- A stay held for a guest walked from another hotel of the chain: the
-- original hotel and reservation (which ends walked).
ALTER TABLE reservations ADD COLUMN relocated_from_hotel_id UUID;

-- +goose Down
ALTER TABLE reservations DROP COLUMN relocated_from_hotel_id;
