package natsbus

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
)

// Invalidator drops the cached reads an event made stale (the regional
// Redis cache implements it when it arrives; until then NoopInvalidator).
type Invalidator interface {
	Invalidate(ctx context.Context, kind, partitionID, eventType string, data []byte) error
}

// NoopInvalidator invalidates nothing.
type NoopInvalidator struct{}

// Invalidate does nothing.
func (NoopInvalidator) Invalidate(context.Context, string, string, string, []byte) error { return nil }

// InvalidateCache runs the cache invalidation consumer of one region: one
// durable per region ("cache-<region>"), shared by the region's replicas,
// starting at new events. Invalidation is idempotent by nature, so no
// processed-event table is needed.
func InvalidateCache(ctx context.Context, js jetstream.JetStream, region string, inv Invalidator, log *slog.Logger) error {
	return Consume(ctx, js, ConsumerConfig{Durable: "cache-" + region, DeliverNew: true, Log: log},
		func(ctx context.Context, m Message) error {
			if m.DecodeErr != nil {
				return m.DecodeErr
			}
			return inv.Invalidate(ctx, m.Event.Kind, m.Event.PartitionID, m.Event.Type, m.Event.Data)
		})
}
