-- +goose Up
CREATE INDEX outbox_unsent_idx ON outbox (created_at, seq) WHERE sent_at IS NULL;

-- +goose Down
DROP INDEX outbox_unsent_idx;
