// Package walk drives the relocation saga between two hotels' partitions
// (docs/adr/0012-walks.md): a JetStream consumer in every region hands each
// walk.requested to the target hotel's store step and each walk.held or
// walk.refused back to the original hotel's. Each step is a fenced write of
// one partition, idempotent by the walk id, so this consumer holds no state
// and may see any message any number of times.
package walk

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/reservation"
)

// Store is what the saga needs from a region's booking store
// (postgres.Store).
type Store interface {
	HoldWalk(ctx context.Context, req reservation.WalkRequest) error
	FinishWalk(ctx context.Context, o reservation.WalkOutcome) error
}

// Saga is the consumer's handler.
type Saga struct {
	store Store
	log   *slog.Logger
}

// New returns the saga's handler over store.
func New(store Store, log *slog.Logger) *Saga {
	if log == nil {
		log = slog.Default()
	}
	return &Saga{store: store, log: log}
}

// ConsumerConfig is the region's durable consumer of the saga's messages.
// Every region reads every walk message; the step runs where its partition
// is homed, and the other regions' stores answer 421, which skips it there.
func ConsumerConfig(region string, transient func(error) bool, log *slog.Logger) natsbus.ConsumerConfig {
	return natsbus.ConsumerConfig{
		Durable:   "walks-" + region,
		Filters:   []string{"berth.hotel.*.walk.>"},
		Transient: transient,
		Log:       log,
	}
}

// Handle is the natsbus.Handler of the saga.
func (s *Saga) Handle(ctx context.Context, m natsbus.Message) error {
	if m.DecodeErr != nil {
		return m.DecodeErr
	}
	e := m.Event
	switch e.Type {
	case reservation.EventWalkRequested:
		var req reservation.WalkRequest
		if err := json.Unmarshal(e.Data, &req); err != nil || req.WalkID == "" || req.ToHotelID == "" {
			return fmt.Errorf("walk request %s: bad data: %v", e.ID, err)
		}
		err := s.store.HoldWalk(ctx, req)
		switch berth.ErrorCode(err) {
		case berth.CodeMisdirected:
			return nil // the target's home region holds it
		case berth.CodeNotFound:
			// The target hotel is gone: nothing there to hold or record,
			// so the original is told directly that the walk cannot be.
			s.log.WarnContext(ctx, "walk target not found; undoing the walk", "walk_id", req.WalkID, "hotel_id", req.ToHotelID)
			return s.finish(ctx, reservation.WalkOutcome{WalkID: req.WalkID, From: req.From, GuestID: req.GuestID,
				To: reservation.StayRef{HotelID: req.ToHotelID, ReservationID: req.WalkID}, Reason: "the target hotel does not exist"})
		}
		return err
	case reservation.EventWalkHeld, reservation.EventWalkRefused:
		var o reservation.WalkOutcome
		if err := json.Unmarshal(e.Data, &o); err != nil || o.WalkID == "" || o.From.ReservationID == "" {
			return fmt.Errorf("walk answer %s: bad data: %v", e.ID, err)
		}
		if o.Held != (e.Type == reservation.EventWalkHeld) {
			return fmt.Errorf("walk answer %s: %s says held=%v", e.ID, e.Type, o.Held)
		}
		return s.finish(ctx, o)
	}
	return nil
}

func (s *Saga) finish(ctx context.Context, o reservation.WalkOutcome) error {
	err := s.store.FinishWalk(ctx, o)
	switch berth.ErrorCode(err) {
	case berth.CodeMisdirected:
		return nil // the original's home region finishes it
	case berth.CodeNotFound:
		s.log.WarnContext(ctx, "walk answer for an unknown stay; dropped", "walk_id", o.WalkID, "reservation_id", o.From.ReservationID)
		return nil
	}
	return err
}
