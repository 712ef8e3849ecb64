-- +goose Up
CREATE INDEX webhook_events_created_idx ON webhook_events (home_region, created_at);

-- +goose Down
DROP INDEX webhook_events_created_idx;
