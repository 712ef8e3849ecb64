package readmodel

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/view"
)

// ConsumerName is the durable consumer (and processed-events scope) of the
// projection.
const ConsumerName = "readmodel"

// Projector applies events to the view and keeps what the lag header needs.
type Projector struct {
	store Store
	log   *slog.Logger
	now   func() time.Time

	mu        sync.Mutex
	lastEvent time.Time     // event time of the newest applied event
	lastDelay time.Duration // commit → applied of the last applied event
	// OnApplied, when set, observes each freshly applied event (tests and
	// the lag figures use it).
	OnApplied func(it view.Item, applied time.Time)
}

// NewProjector returns a projector writing to store.
func NewProjector(store Store, log *slog.Logger) *Projector {
	return &Projector{store: store, log: log, now: time.Now}
}

// Handle is the natsbus.Handler of the projection.
func (p *Projector) Handle(ctx context.Context, m natsbus.Message) error {
	if m.DecodeErr != nil {
		return m.DecodeErr
	}
	it, ok, err := view.FromEvent(m.Event)
	if err != nil {
		return err
	}
	var item *view.Item
	if ok {
		item = &it
	}
	fresh, _, err := p.store.Apply(ctx, ConsumerName, m.Event.ID, item)
	if err != nil {
		return err
	}
	if fresh {
		now := p.now()
		p.mu.Lock()
		if m.Event.Time.After(p.lastEvent) {
			p.lastEvent = m.Event.Time
		}
		p.lastDelay = now.Sub(m.Event.Time)
		p.mu.Unlock()
		if p.OnApplied != nil && item != nil {
			p.OnApplied(it, now)
		}
	}
	return nil
}

// Lag estimates how far the view trails the booking database: when the
// consumer has work pending, the age of the newest applied event; when it
// is caught up, the commit-to-apply delay of the last event.
func (p *Projector) Lag(pending uint64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastEvent.IsZero() {
		return 0
	}
	if pending > 0 {
		return max(p.now().Sub(p.lastEvent), 0)
	}
	return max(p.lastDelay, 0)
}
