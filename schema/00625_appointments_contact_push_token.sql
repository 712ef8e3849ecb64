-- +goose Up
-- The device token a patient's app registered for push notifications (FCM);
-- beside contact_email and contact_phone, where an appointment's messages go.
ALTER TABLE appointments ADD COLUMN contact_push_token TEXT;

-- +goose Down
ALTER TABLE appointments DROP COLUMN contact_push_token;
