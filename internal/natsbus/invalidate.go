package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/berthhq/berth/internal/events"
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
//
// The partition and the event type are read from the subject
// (berth.<kind>.<partition_id>.<event_type>, which the relay builds from the
// same record as the body), so the body is never decoded and the
// invalidator gets no data.
func InvalidateCache(ctx context.Context, js jetstream.JetStream, region string, inv Invalidator, log *slog.Logger) error {
	return Consume(ctx, js, ConsumerConfig{Durable: "cache-" + region, DeliverNew: true, SubjectOnly: true, Log: log},
		func(ctx context.Context, m Message) error {
			kind, partitionID, typ, err := ParseSubject(m.Subject)
			if err != nil {
				return err
			}
			return inv.Invalidate(ctx, kind, partitionID, typ, nil)
		})
}

// ParseSubject splits an event subject (events.Subject) into the
// partition's kind, its id and the event type.
func ParseSubject(subject string) (kind, partitionID, eventType string, err error) {
	rest, ok := strings.CutPrefix(subject, events.SubjectPrefix)
	if ok {
		kind, rest, ok = strings.Cut(rest, ".")
	}
	if ok {
		partitionID, eventType, ok = strings.Cut(rest, ".")
	}
	if !ok || kind == "" || partitionID == "" || eventType == "" {
		return "", "", "", fmt.Errorf("event subject %q: want %s<kind>.<partition>.<type>", subject, events.SubjectPrefix)
	}
	return kind, partitionID, eventType, nil
}

// WithInvalidation returns a handler that, on every delivery, both drops
// the cached reads of the event's partition (read from the subject, as
// InvalidateCache does) and runs h, whatever the other's outcome, and
// fails when either failed. It lets one consumer per process do the
// region's cache invalidation beside another idempotent job (the search
// index), one delivery per event instead of two (docs/adr/0019).
//
// Neither job can lose the other's work: a failure of either makes the
// message come back, and the redelivery runs both again — a second bump of
// a generation and a re-applied event change nothing. Neither job waits on
// the other: h runs even while Redis is down, so the index stays current
// through a cache outage on every delivery. An invalidation's failure wraps
// berth.ErrDependency and is retried for as long as it lasts and never
// dead-lettered, even when joined with h's error; a message that fails h on
// its own account is dead-lettered only after its invalidation succeeded
// (an invalidation error in the join would have made the failure transient).
func WithInvalidation(inv Invalidator, h Handler) Handler {
	return func(ctx context.Context, m Message) error {
		kind, partitionID, typ, err := ParseSubject(m.Subject)
		if err != nil {
			return err
		}
		invErr := inv.Invalidate(ctx, kind, partitionID, typ, nil)
		return errors.Join(invErr, h(ctx, m))
	}
}
