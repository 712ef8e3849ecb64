-- +goose Up
-- The relay claims the oldest unsent events of its own region: with the
-- region first, the claim reads them in order and stops at its limit
-- however many other regions' events wait (docs/adr/0016-relay-round.md).
CREATE INDEX outbox_unsent_region_idx ON outbox (home_region, created_at, seq) WHERE sent_at IS NULL;

-- +goose Down
DROP INDEX outbox_unsent_region_idx;
