-- +goose Up
-- Replaced by outbox_unsent_region_idx (00901): every reader of unsent rows
-- asks for one region's.
DROP INDEX outbox_unsent_idx;

-- +goose Down
CREATE INDEX outbox_unsent_idx ON outbox (created_at, seq) WHERE sent_at IS NULL;
