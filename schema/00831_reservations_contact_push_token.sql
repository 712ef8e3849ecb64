-- +goose Up
-- The device token a guest's app registered for push notifications (FCM),
-- beside contact_email and contact_phone: where a stay's messages go (the
-- read model's rm_reservations has the column since 00626).
ALTER TABLE reservations ADD COLUMN contact_push_token TEXT;

-- +goose Down
ALTER TABLE reservations DROP COLUMN contact_push_token;
