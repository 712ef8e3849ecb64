-- +goose Up
-- Replaced by outbox_unsent_by_partition_idx (00903).
DROP INDEX outbox_unsent_partition_idx;

-- +goose Down
CREATE INDEX outbox_unsent_partition_idx ON outbox (partition_id, created_at, seq) WHERE sent_at IS NULL;
