package searchindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/reservation"
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
func (x *Index) Handle(_ context.Context, m natsbus.Message) error {
	if m.DecodeErr != nil {
		return m.DecodeErr
	}
	e := m.Event
	var changed bool
	switch e.Kind + "/" + e.Type {
	case "hotel/" + reservation.EventCatalog:
		var h reservation.Hotel
		if err := json.Unmarshal(e.Data, &h); err != nil {
			return fmt.Errorf("search: %s %s: %w", e.Type, e.ID, err)
		}
		if h.ID == "" || h.ID != e.PartitionID || h.CatalogVersion < 1 {
			return fmt.Errorf("search: %s %s: hotel id or version missing", e.Type, e.ID)
		}
		fresh, err := x.ApplyHotel(h)
		if err != nil {
			return indexError{err}
		}
		changed = fresh
	case "hotel/" + reservation.EventInventory:
		var c reservation.InventoryChange
		if err := json.Unmarshal(e.Data, &c); err != nil {
			return fmt.Errorf("search: %s %s: %w", e.Type, e.ID, err)
		}
		n, err := x.applyInventory(c)
		if err != nil {
			return fmt.Errorf("search: %s %s: %w", e.Type, e.ID, err)
		}
		changed = n > 0
	case "hotel/" + reservation.EventHeld, "hotel/" + reservation.EventConfirmed,
		"hotel/" + reservation.EventCancelled, "hotel/" + reservation.EventExpired, "hotel/" + reservation.EventCheckedOut:
		// Bookings carry what is left of the nights they changed.
		var d struct {
			Inventory *reservation.InventoryChange `json:"inventory"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return fmt.Errorf("search: %s %s: %w", e.Type, e.ID, err)
		}
		if d.Inventory == nil {
			return nil // a confirm of a live hold changes no night
		}
		n, err := x.applyInventory(*d.Inventory)
		if err != nil {
			return fmt.Errorf("search: %s %s: %w", e.Type, e.ID, err)
		}
		changed = n > 0
	default:
		return nil // reservations, clinics, placements: not the search's
	}
	if changed && x.OnApplied != nil {
		x.OnApplied(e.Time)
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
		// A replica that is gone for good leaves no consumer behind.
		InactiveThreshold: time.Hour,
		Transient:         Transient,
		Log:               log,
	}
}

// Run creates the index's consumer, builds the index from src (the
// snapshot, read after the consumer exists so no event falls between the
// two) and consumes events until ctx ends. A build that fails is retried.
func (x *Index) Run(ctx context.Context, js jetstream.JetStream, cfg natsbus.ConsumerConfig, src Source) error {
	for {
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
	go func() { done <- natsbus.Consume(ctx, js, cfg, x.Handle) }()
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
