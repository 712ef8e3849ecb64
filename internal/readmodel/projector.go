package readmodel

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/view"
)

// ConsumerName is the durable consumer (and processed-events scope) of the
// projection.
const ConsumerName = "readmodel"

// DefaultMaxRound bounds the events one statement applies.
const DefaultMaxRound = 256

// roundTimeout bounds one round's statement; a caller waits no longer
// than its own context allows (the consumer's handle timeout).
const roundTimeout = 15 * time.Second

// Projector applies events to the view and keeps what the lag header needs.
//
// Events handled concurrently are applied together, group-commit style
// (docs/adr/0021-read-model-rounds.md): a call joins the round not yet
// sent, or sends one at once when none is running, and a round is one
// statement (Store.ApplyAll) — one round trip and one commit for every event
// that arrived while the previous round ran, instead of one of each per
// event. A call returns only after its own event's round committed, so the
// consumer still acks an event only once its row is in the view. A round
// that fails sends each of its events back to apply alone (Store.Apply):
// an event the database refuses fails on its own account, and its
// round-mates are applied.
type Projector struct {
	store Store
	log   *slog.Logger
	now   func() time.Time
	// MaxRound bounds the events of one round (DefaultMaxRound); 1 applies
	// every event alone.
	MaxRound int

	mu        sync.Mutex
	lastEvent time.Time     // event time of the newest applied event
	lastDelay time.Duration // commit → applied of the last applied event
	// OnApplied, when set, observes each freshly applied event (tests and
	// the lag figures use it).
	OnApplied func(it view.Item, applied time.Time)

	roundMu sync.Mutex
	queue   []*waiter // events waiting for the next round
	running bool      // a round is running (and takes the queue after it)
	// Rounds of more than one event, the events they carried, and those
	// that failed (their events then applied alone).
	rounds, roundEvents, roundsFailed atomic.Int64
	waiting                           atomic.Int64 // calls of apply in a round or queued for one
}

// Rounds reports the rounds of more than one event run so far, the events
// they carried, and how many of them failed and sent their events to be
// applied alone.
func (p *Projector) Rounds() (rounds, events, failed int64) {
	return p.rounds.Load(), p.roundEvents.Load(), p.roundsFailed.Load()
}

// Waiting reports the events handed to the projector whose round has not
// answered yet: those in the running round and those queued for the next.
// Each is a consumer worker's message, so the workers bound it.
func (p *Projector) Waiting() int {
	return int(p.waiting.Load())
}

// waiter is one event waiting for its round.
type waiter struct {
	ctx    context.Context
	change view.Change
	done   chan outcome // buffered: a round never blocks on a caller gone
}

type outcome struct {
	applied view.Applied
	err     error
	alone   bool // the round failed: apply this event alone
}

// NewProjector returns a projector writing to store.
func NewProjector(store Store, log *slog.Logger) *Projector {
	return &Projector{store: store, log: log, now: time.Now, MaxRound: DefaultMaxRound}
}

// Handle is the natsbus.Handler of the projection. It reads the message
// itself, in one pass (view.Project), when the consumer did not decode it
// (natsbus.ConsumerConfig.SubjectOnly).
func (p *Projector) Handle(ctx context.Context, m natsbus.Message) error {
	e, err := p.event(m)
	if err != nil {
		return err
	}
	c := view.Change{EventID: e.ID, Item: e.Item}
	applied, err := p.apply(ctx, c)
	if err != nil {
		return err
	}
	if applied.Fresh {
		now := p.now()
		p.mu.Lock()
		if e.Time.After(p.lastEvent) {
			p.lastEvent = e.Time
		}
		p.lastDelay = now.Sub(e.Time)
		p.mu.Unlock()
		if p.OnApplied != nil && e.Item != nil {
			p.OnApplied(*e.Item, now)
		}
	}
	return nil
}

// event is what the projection needs of a message.
func (p *Projector) event(m natsbus.Message) (view.Event, error) {
	if m.DecodeErr != nil {
		return view.Event{}, m.DecodeErr
	}
	if m.Event.ID != "" { // decoded by the consumer
		e := view.Event{ID: m.Event.ID, Type: m.Event.Type, Time: m.Event.Time}
		it, ok, err := view.FromEvent(m.Event)
		if ok {
			e.Item = &it
		}
		return e, err
	}
	kind, _, typ, err := natsbus.ParseSubject(m.Subject)
	if err != nil {
		kind, typ = "", "" // the envelope says what it is
	}
	return view.Project(kind, typ, m.Data)
}

// apply applies one change in the next round, or alone.
func (p *Projector) apply(ctx context.Context, c view.Change) (view.Applied, error) {
	if p.MaxRound <= 1 {
		return p.alone(ctx, c)
	}
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	w := &waiter{ctx: ctx, change: c, done: make(chan outcome, 1)}
	p.roundMu.Lock()
	p.queue = append(p.queue, w)
	if !p.running {
		p.running = true
		go p.runRounds()
	}
	p.roundMu.Unlock()
	select {
	case o := <-w.done:
		if o.alone {
			return p.alone(ctx, c)
		}
		return o.applied, o.err
	case <-ctx.Done():
		// The round goes on without us; the consumer redelivers the event,
		// which is then a duplicate if the round applied it.
		return view.Applied{}, ctx.Err()
	}
}

func (p *Projector) alone(ctx context.Context, c view.Change) (view.Applied, error) {
	fresh, changed, err := p.store.Apply(ctx, ConsumerName, c.EventID, c.Item)
	return view.Applied{Fresh: fresh, Changed: changed}, err
}

// runRounds runs rounds until no event waits.
func (p *Projector) runRounds() {
	for {
		p.roundMu.Lock()
		round := p.take()
		if len(round) == 0 {
			p.running = false
			p.roundMu.Unlock()
			return
		}
		p.roundMu.Unlock()
		p.run(round)
	}
}

// take removes the next round from the queue (p.roundMu held): in arrival
// order, at most MaxRound events, and at most one per event id and one per
// view row, since one statement cannot write a row twice; the others wait
// for the next round, so each row sees its events one after another as if
// applied alone. Events whose caller gave up are dropped (their redelivery
// applies them).
func (p *Projector) take() []*waiter {
	var (
		round []*waiter
		rest  = p.queue[:0]
		ids   = map[string]bool{}
		rows  = map[[3]string]bool{}
	)
	for _, w := range p.queue {
		if w.ctx.Err() != nil {
			continue
		}
		var row [3]string
		if it := w.change.Item; it != nil {
			row = [3]string{it.Kind, it.PartitionID, it.ID}
		}
		if len(round) >= p.MaxRound || ids[w.change.EventID] || (w.change.Item != nil && rows[row]) {
			rest = append(rest, w)
			continue
		}
		ids[w.change.EventID] = true
		if w.change.Item != nil {
			rows[row] = true
		}
		round = append(round, w)
	}
	clear(p.queue[len(rest):])
	p.queue = rest
	return round
}

// run applies one round in one statement and answers its callers. Rows are
// written in key order, so two read model processes whose rounds share
// rows take their locks in the same order.
func (p *Projector) run(round []*waiter) {
	slices.SortFunc(round, func(a, b *waiter) int { return compareRows(a.change.Item, b.change.Item) })
	changes := make([]view.Change, len(round))
	for i, w := range round {
		changes[i] = w.change
	}
	// The round runs under the context of one of its callers (the first in
	// key order; so its database span is in that event's trace), without
	// that caller's cancellation: the others wait for it too.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(round[0].ctx), roundTimeout)
	var (
		applied []view.Applied
		err     error
	)
	if len(round) == 1 {
		// Alone, the one-event statement is the cheaper of the two.
		var a view.Applied
		a.Fresh, a.Changed, err = p.store.Apply(ctx, ConsumerName, changes[0].EventID, changes[0].Item)
		applied = []view.Applied{a}
	} else {
		applied, err = p.store.ApplyAll(ctx, ConsumerName, changes)
		p.rounds.Add(1)
		p.roundEvents.Add(int64(len(round)))
		if err != nil {
			p.roundsFailed.Add(1)
		}
	}
	cancel()
	switch {
	case err != nil && len(round) == 1:
		round[0].done <- outcome{err: err}
		return
	case err != nil:
		p.log.Warn("round of events failed; applying each alone", "events", len(round), "err", err)
		for _, w := range round {
			w.done <- outcome{alone: true}
		}
		return
	}
	for i, w := range round {
		w.done <- outcome{applied: applied[i]}
	}
}

func compareRows(a, b *view.Item) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.PartitionID, b.PartitionID), cmp.Compare(a.ID, b.ID))
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
