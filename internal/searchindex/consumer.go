package searchindex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/reservation"
	jsoniter "github.com/json-iterator/go"
	"github.com/nats-io/nats.go/jetstream"
)

// indexError marks a failure of the index itself (a dependency of the
// consumer), as opposed to a failure of the event: it is retried for as
// long as it lasts and never dead-lettered.
type indexError struct{ err error }

func (e indexError) Error() string { return e.err.Error() }
func (e indexError) Unwrap() error { return e.err }

// Transient is the consumer's natsbus.ConsumerConfig.Transient: index
// failures, deadlines and network errors.
func Transient(err error) bool {
	var ie indexError
	return errors.As(err, &ie) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Handle is the natsbus.Handler of the search consumer. It is idempotent:
// the catalog, the index and the summary keep the newest version of each
// hotel and night, so a redelivered or late event changes nothing. A body
// that is not a valid event fails on its own account (and is dead-lettered
// after the consumer's limit).
//
// Kind, partition and type come from the subject (natsbus.ParseSubject, the
// consumer is SubjectOnly), and the body is decoded once, straight into the
// fields this event type needs: the envelope's id and time, and of a
// reservation event only its "inventory". Decoding the whole envelope and
// then its data again was most of the index's cost per event
// (docs/PERFORMANCE.md, "CPU per hold").
func (x *Index) Handle(_ context.Context, m natsbus.Message) error {
	kind, partitionID, typ, err := natsbus.ParseSubject(m.Subject)
	if err != nil {
		return err
	}
	if kind != "hotel" {
		return nil // clinics: not the search's
	}
	var (
		changed bool
		at      time.Time
	)
	switch typ {
	case reservation.EventCatalog:
		var e envelope[reservation.Hotel]
		if err := e.decode(m.Data, typ); err != nil {
			return err
		}
		h := e.Data
		if h.ID == "" || h.ID != partitionID || h.CatalogVersion < 1 {
			return fmt.Errorf("search: %s %s: hotel id or version missing", typ, e.ID)
		}
		fresh, err := x.ApplyHotel(h)
		if err != nil {
			return indexError{err}
		}
		changed, at = fresh, e.Time
	case reservation.EventInventory:
		var e envelope[reservation.InventoryChange]
		if err := e.decode(m.Data, typ); err != nil {
			return err
		}
		n, err := x.applyInventory(e.Data)
		if err != nil {
			return fmt.Errorf("search: %s %s: %w", typ, e.ID, err)
		}
		changed, at = n > 0, e.Time
	case reservation.EventHeld, reservation.EventConfirmed, reservation.EventCancelled,
		reservation.EventExpired, reservation.EventCheckedOut:
		// Bookings carry what is left of the nights they changed; the rest
		// of their data is not the search's and is skipped unread.
		var e envelope[struct {
			Inventory *reservation.InventoryChange `json:"inventory"`
		}]
		if err := e.decode(m.Data, typ); err != nil {
			return err
		}
		if e.Data.Inventory == nil {
			return nil // a confirm of a live hold changes no night
		}
		n, err := x.applyInventory(*e.Data.Inventory)
		if err != nil {
			return fmt.Errorf("search: %s %s: %w", typ, e.ID, err)
		}
		changed, at = n > 0, e.Time
	default:
		return nil // other reservation events, placements: not the search's
	}
	if changed && x.OnApplied != nil {
		x.OnApplied(at)
	}
	return nil
}

var jsonAPI = jsoniter.ConfigCompatibleWithStandardLibrary

// envelope is the part of an event's CloudEvents envelope (events.Envelope)
// that the index reads, with the data decoded in the same pass.
type envelope[D any] struct {
	SpecVersion string    `json:"specversion"`
	ID          string    `json:"id"`
	Time        time.Time `json:"time"`
	Data        D         `json:"data"`
}

// decode reads body into e and checks what events.Decode checks of the
// fields the subject does not carry.
//
// It decodes with json-iterator in its encoding/json-compatible mode (same
// tags, same errors for malformed JSON, the fields it skips still checked):
// four times faster than encoding/json on a hold's event
// (BenchmarkHandleHeld), and every booking service decodes every hold of
// every region.
func (e *envelope[D]) decode(body []byte, typ string) error {
	if err := jsonAPI.Unmarshal(body, e); err != nil {
		return fmt.Errorf("search: %s: decode event: %w", typ, err)
	}
	if e.SpecVersion != events.SpecVersion || e.ID == "" {
		return fmt.Errorf("search: %s: decode event: specversion %q, id %q", typ, e.SpecVersion, e.ID)
	}
	return nil
}

// ConsumerConfig is the consumer of one index.
func ConsumerConfig(region, instance string, log *slog.Logger) natsbus.ConsumerConfig {
	return natsbus.ConsumerConfig{
		// One consumer per index, not per region: every replica of a
		// region's booking service holds its own index, and each needs
		// every event (a shared durable would split them between replicas).
		Durable: "search-" + region + "-" + instance,
		Filters: []string{"berth.hotel.*." + reservation.EventCatalog, "berth.hotel.*." + reservation.EventInventory,
			"berth.hotel.*.reservation.>"},
		// The index is built from a snapshot read after the consumer
		// exists, so the consumer starts with the events after it.
		DeliverNew: true,
		// Handle reads kind, partition and type from the subject.
		SubjectOnly: true,
		// A replica that is gone for good leaves no consumer behind.
		InactiveThreshold: time.Hour,
		Transient:         Transient,
		Log:               log,
	}
}

// ConsumerWithCacheConfig is the consumer of an index whose process also
// invalidates the region's cache from the same deliveries
// (natsbus.WithInvalidation, docs/adr/0019): every event, not only the
// search's, and, when the consumer is created, the events of the last
// replay before now, so that the cached reads made stale while the process
// was down are dropped — a cached read lives at most one cache TTL, so a
// replay of the TTL (plus the cache's read lag and a margin) loses no
// invalidation that still matters. The index ignores what it already has
// (versions), so the replay costs it nothing but the decoding. replay 0
// starts at new events.
func ConsumerWithCacheConfig(region, instance string, replay time.Duration, log *slog.Logger) natsbus.ConsumerConfig {
	cfg := ConsumerConfig(region, instance, log)
	cfg.Durable = "search-cache-" + region + "-" + instance
	cfg.Filters = natsbus.EventSubjects
	// A worker waits in an invalidation's bump round (which lingers a few
	// ms for company, rediscache.Options.EventLinger): enough workers keep
	// a burst of events in one round and the consumer ahead of any rate
	// the region takes holds at.
	cfg.Workers = 64
	// While Redis is down every message waits for its invalidation, and
	// the server stops delivering new ones past this many: the index,
	// applied on every delivery, stays current for that many events into
	// an outage (tens of seconds at the rates measured here) instead of a
	// thousand.
	cfg.MaxAckPending = 10_000
	// An ordered consumer (no acks, in the server's memory, docs/adr/0024):
	// the consumer is this process's alone and its process replays what it
	// needs when it starts again, so an ack per event and a consumer state
	// on disk bought nothing the replay does not give. Its retries are the
	// process's own, bounded by MaxAckPending as the server bounded them.
	cfg.Ordered = true
	// It starts at a time set now, before the index's snapshot is read, so
	// no event falls between the two: with a margin for the server's clock
	// when there is nothing to replay.
	cfg.StartTime = time.Now().Add(-max(replay, orderedStartMargin))
	return cfg
}

// orderedStartMargin is how far before the snapshot an ordered consumer
// with nothing to replay starts: the stream's times are the NATS server's
// clock, the snapshot's this process's. What it replays the index already
// has.
const orderedStartMargin = 5 * time.Second

// Run creates the index's consumer, builds the index from src (the
// snapshot, read after the consumer exists so no event falls between the
// two) and consumes events until ctx ends. A build that fails is retried.
func (x *Index) Run(ctx context.Context, js jetstream.JetStream, cfg natsbus.ConsumerConfig, src Source) error {
	return x.RunWith(ctx, js, cfg, src, x.Handle)
}

// RunWith is Run with a handler of the consumer's messages that wraps
// x.Handle (natsbus.WithInvalidation).
func (x *Index) RunWith(ctx context.Context, js jetstream.JetStream, cfg natsbus.ConsumerConfig, src Source, h natsbus.Handler) error {
	// An ordered consumer is created by Consume itself, at its StartTime,
	// which is before the snapshot (ConsumerWithCacheConfig).
	for !cfg.Ordered {
		if _, err := natsbus.EnsureConsumer(ctx, js, cfg); err == nil {
			break
		} else if ctx.Err() != nil {
			return nil
		} else {
			x.log.Warn("search consumer not ready; retrying", "err", err)
		}
		if !sleep(ctx, time.Second) {
			return nil
		}
	}
	done := make(chan error, 1)
	go func() { done <- natsbus.Consume(ctx, js, cfg, h) }()
	for wait := time.Second; !x.Ready() && ctx.Err() == nil; wait = min(wait*2, 30*time.Second) {
		if err := x.Build(ctx, src); err != nil && ctx.Err() == nil {
			x.log.Error("search index build failed; retrying", "err", err, "in", wait.String())
			sleep(ctx, wait)
		}
	}
	return <-done
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (x *Index) applyInventory(c reservation.InventoryChange) (int, error) {
	if c.RoomTypeID == "" {
		return 0, errors.New("room type missing")
	}
	return x.ApplyInventory(c)
}
