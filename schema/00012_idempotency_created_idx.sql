-- +goose Up
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

-- +goose Down
DROP INDEX idempotency_keys_created_idx;
