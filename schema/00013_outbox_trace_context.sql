-- +goose Up
-- The W3C trace context (traceparent, tracestate) of the request that wrote
-- the event, as a small JSON object; NULL when the write was not traced. The
-- relay puts it in the NATS headers so consumers continue the request's trace.
ALTER TABLE outbox ADD COLUMN trace_context TEXT;

-- +goose Down
ALTER TABLE outbox DROP COLUMN trace_context;
