-- +goose Up
-- outbox_unsent_partition_idx (00900) again, with a predicate the relay's
-- claim cannot prove: the claim has no condition on partition_id, the order
-- check's `o.partition_id = …` implies `partition_id IS NOT NULL` (always true
-- of the column). Without it, when the statistics say nothing is unsent, the
-- planner may read this whole index and sort it for the claim instead of
-- reading outbox_unsent_region_idx in order (docs/adr/0016-relay-round.md).
CREATE INDEX outbox_unsent_by_partition_idx ON outbox (partition_id, created_at, seq) WHERE sent_at IS NULL AND partition_id IS NOT NULL;

-- +goose Down
DROP INDEX outbox_unsent_by_partition_idx;
