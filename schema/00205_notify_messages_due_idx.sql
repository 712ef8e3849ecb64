-- +goose Up
CREATE INDEX notify_messages_due_idx ON notify_messages (next_attempt_at) WHERE status = 'pending';

-- +goose Down
DROP INDEX notify_messages_due_idx;
