-- +goose Up
-- The relay's order check asks, for each partition of a claimed batch,
-- whether an earlier event of that partition is still unsent (claimed by
-- another replica, or left by the partition's former home region). Without
-- this index it read every row of the partition the primary key holds, sent
-- ones included, or every unsent entry of every partition
-- (docs/adr/0016-relay-round.md).
CREATE INDEX outbox_unsent_partition_idx ON outbox (partition_id, created_at, seq) WHERE sent_at IS NULL;

-- +goose Down
DROP INDEX outbox_unsent_partition_idx;
