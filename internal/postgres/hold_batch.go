package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// Hot-partition batching (group commit; docs/adr/0010-hold-batching.md).
//
// When many holds of one room type arrive together, each alone would queue
// on the same night rows: one transaction at a time, each paying its own
// lock hand-over and commit. Instead the store coalesces them. Per room type
// (hotel, room type) at most one hold transaction of this process runs at a
// time:
//
//   - the first hold of an idle room type runs at once, alone, exactly as
//     without batching (no timer, no wait: off when there is no contention);
//   - holds that arrive while one runs queue; when it ends, everything
//     queued (up to the batch size) goes as the next batch, in one
//     transaction: the nights of every hold locked in date order and read
//     (lockBatchNightsSQL), the decision made in arrival order by
//     reservation.Allot, then one round trip with one conditional UPDATE
//     taking every winner's rooms (takeBatchSQL) and, per hold, the
//     guest's count, the reservation, its outbox event and its key with its
//     own answer — a loser's key with its own 409 sold_out.
//
// A hold that cannot be decided with its batch-mates runs alone after the
// batch (its own transaction, the ordinary path): a night of its stay not
// homed here or not loaded (421, 404 and the unloaded night are the
// ordinary path's answers), a key it shares with a batch-mate, a key taken
// already (the replay), a per-guest limit that refused it. The batch is
// then run again without it. Any other failure of a batch runs each of its
// holds alone, so a bad request never fails its batch-mates.

// DefaultHoldBatch is the default largest batch of holds of one room type.
const DefaultHoldBatch = 0

// lockBatchNightsSQL locks the nights a batch needs ($3, distinct) in date
// order — the partition's lock order — and reads what is left of them, with
// the price and the database time. The home_region condition is the fence,
// as in takeStaySQL: a move re-homes these rows in its own transaction.
const lockBatchNightsSQL = `
SELECT i.night, i.sell_limit - i.reserved, i.version, rt.price_cents, rt.currency, now()
FROM room_inventory AS i JOIN room_types AS rt ON rt.hotel_id = i.hotel_id AND rt.room_type_id = i.room_type_id
WHERE i.hotel_id = $1 AND i.room_type_id = $2 AND i.night = ANY($3::DATE[]) AND i.home_region = $4
ORDER BY i.night
FOR UPDATE OF i`

// takeBatchSQL takes the rooms of every winner of a batch: $4 more rooms
// on each night $3, the version bumped once per winner ($5). It stays a
// conditional write — the rows are locked and the decision made on their
// latest state, so it must touch every night; fewer means the decision
// was wrong, and the batch rolls back rather than oversell.
const takeBatchSQL = `
UPDATE room_inventory AS i SET reserved = i.reserved + d.n, version = i.version + d.k
FROM unnest($3::DATE[], $4::INT4[], $5::INT4[]) AS d(night, n, k)
WHERE i.hotel_id = $1 AND i.room_type_id = $2 AND i.night = d.night
  AND i.home_region = $6 AND i.reserved + d.n <= i.sell_limit`

// holdCall is a hold waiting for its batch.
type holdCall struct {
	ctx  context.Context
	req  reservation.HoldRequest
	idem *berth.Idem
	gen  uint64

	resp berth.Response
	err  error
	done chan struct{}
}

func (c *holdCall) finish(resp berth.Response, err error) {
	c.resp, c.err = resp, err
	close(c.done)
}

// holdQueue is a busy room type: a hold transaction runs, these wait.
type holdQueue struct{ waiting []*holdCall }

// BatchStats counts what batching did since the store started.
type BatchStats struct {
	Batches int64 // batch transactions committed
	Batched int64 // holds decided in them
	Alone   int64 // holds of a batch that ran alone after it
}

type batchCounters struct{ batches, batched, alone atomic.Int64 }

// SetHoldBatch sets the largest batch of holds of one room type (0 or 1:
// batching off, every hold its own transaction). Call it while wiring,
// before the store serves requests.
func (s *Store) SetHoldBatch(n int) { s.batchMax = n }

// HoldBatch returns the largest batch of holds of one room type (≤ 1: off).
func (s *Store) HoldBatch() int { return s.batchMax }

// HoldBatchStats returns what batching did so far.
func (s *Store) HoldBatchStats() BatchStats {
	return BatchStats{Batches: s.batch.batches.Load(), Batched: s.batch.batched.Load(), Alone: s.batch.alone.Load()}
}

// holdQueued runs a hold through its room type's queue: at once and alone
// when the room type is idle, else with the next batch.
func (s *Store) holdQueued(ctx context.Context, req reservation.HoldRequest, idem *berth.Idem, gen uint64) (berth.Response, error) {
	key := req.HotelID + "\x00" + req.RoomTypeID
	s.mu.Lock()
	q, busy := s.queues[key]
	if !busy {
		s.queues[key] = &holdQueue{}
		s.mu.Unlock()
		defer s.nextBatch(key)
		return s.holdAlone(ctx, req, idem, gen)
	}
	c := &holdCall{ctx: ctx, req: req, idem: idem, gen: gen, done: make(chan struct{})}
	q.waiting = append(q.waiting, c)
	s.mu.Unlock()
	select {
	case <-c.done:
		return c.resp, c.err
	case <-ctx.Done():
		if s.leaveQueue(key, c) {
			return berth.Response{}, fmt.Errorf("hold: %w", ctx.Err())
		}
		// Its batch has started: its outcome is coming.
		<-c.done
		return c.resp, c.err
	}
}

// leaveQueue takes c out of its queue if no batch has taken it yet.
func (s *Store) leaveQueue(key string, c *holdCall) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[key]
	if q == nil {
		return false
	}
	i := slices.Index(q.waiting, c)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return true
}

// nextBatch is called when a hold transaction of the room type ended:
// the holds queued meanwhile go as the next batch (in a goroutine of its
// own, so that the caller answers its request now), or the room type is
// idle again.
func (s *Store) nextBatch(key string) {
	s.mu.Lock()
	q := s.queues[key]
	if len(q.waiting) == 0 {
		delete(s.queues, key)
		s.mu.Unlock()
		return
	}
	n := min(len(q.waiting), max(s.batchMax, 1))
	calls := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	s.mu.Unlock()
	go func() {
		defer s.nextBatch(key)
		s.runBatch(calls)
	}()
}

// runBatch decides calls (of one room type, in arrival order): together
// where it can, alone where it must. Every call is finished exactly once,
// also when something panics.
func (s *Store) runBatch(calls []*holdCall) {
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("hold batch: panic: %v", p)
			for _, c := range calls {
				select {
				case <-c.done:
				default:
					c.finish(berth.Response{}, err)
				}
			}
		}
	}()
	var batch, alone []*holdCall
	keys := map[string]bool{}
	for _, c := range calls {
		if c.idem != nil {
			if keys[c.idem.Key] {
				alone = append(alone, c) // a duplicate: it replays after the batch
				continue
			}
			keys[c.idem.Key] = true
		}
		batch = append(batch, c)
	}
	// The batch's transaction is every call's: none's cancellation may
	// abort it (statement_timeout and lock_timeout still bound it).
	ctx := context.WithoutCancel(calls[0].ctx)
	for len(batch) > 1 {
		out, err := s.holdBatch(ctx, batch)
		var redo *batchRedo
		if errors.As(err, &redo) {
			// Rolled back: run it again without the holds that must go alone.
			alone = append(alone, redo.calls...)
			batch = slices.DeleteFunc(batch, func(c *holdCall) bool { return slices.Contains(redo.calls, c) })
			continue
		}
		if err != nil {
			// Whatever failed, each hold now runs alone: the one that caused
			// it fails by itself, the others are decided as without batching.
			alone = append(alone, batch...)
			batch = nil
			break
		}
		s.batch.batches.Add(1)
		s.batch.batched.Add(int64(len(out.decided)))
		for _, d := range out.decided {
			d.call.finish(d.resp, d.err)
		}
		alone = append(alone, out.alone...)
		batch = nil
	}
	alone = append(batch, alone...) // a batch of one is a hold alone
	if len(alone) > 0 {
		s.batch.alone.Add(int64(len(alone)))
	}
	slices.SortStableFunc(alone, func(a, b *holdCall) int { return slices.Index(calls, a) - slices.Index(calls, b) })
	for _, c := range alone {
		c.finish(s.holdAlone(c.ctx, c.req, c.idem, c.gen))
	}
}

// batchRedo rolls a batch back: calls must run alone, the rest again.
type batchRedo struct{ calls []*holdCall }

func (e *batchRedo) Error() string {
	return fmt.Sprintf("%d hold(s) of the batch must run alone", len(e.calls))
}

type decided struct {
	call *holdCall
	resp berth.Response
	err  error
}

type batchOutcome struct {
	decided []decided
	short   [][]string  // per decided call: the nights a loser lacked, nil for a winner
	alone   []*holdCall // not decidable with the batch (nights not here)
}

// holdBatch runs one batch transaction: the nights locked and read, the
// decision (reservation.Allot), then everything written in one round trip.
func (s *Store) holdBatch(ctx context.Context, calls []*holdCall) (batchOutcome, error) {
	first := calls[0].req
	var nights []time.Time
	for _, c := range calls {
		for _, d := range c.req.Stay.Dates() {
			nights = append(nights, d.Time())
		}
	}
	slices.SortFunc(nights, func(a, b time.Time) int { return a.Compare(b) })
	nights = slices.CompactFunc(nights, func(a, b time.Time) bool { return a.Equal(b) })

	var out batchOutcome
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		out = batchOutcome{}
		state, t, err := lockBatchNights(ctx, tx, first.HotelID, first.RoomTypeID, nights, s.region)
		if err != nil {
			return err
		}
		t.expiresAt = t.now.Add(s.holdTTL)

		// A hold with a night not here (not loaded, not homed here, an
		// unknown room type) runs alone: the ordinary path names why.
		var (
			plan   []*holdCall
			claims []reservation.Claim
		)
		left := make(map[string]int, len(state))
		for n, st := range state {
			left[n] = st.left
		}
		for _, c := range calls {
			ns := nightsOf(c.req.Stay)
			if !everyNight(state, ns) {
				out.alone = append(out.alone, c)
				continue
			}
			plan = append(plan, c)
			claims = append(claims, reservation.Claim{Nights: ns, Quantity: c.req.Quantity})
		}
		if len(plan) == 0 {
			return nil
		}
		return s.writeBatch(ctx, tx, plan, claims, reservation.Allot(left, claims), state, t, &out)
	})
	if err != nil {
		return batchOutcome{}, err
	}
	// Committed: the sold-out cache learns what the batch found.
	if s.soldOut != nil {
		for i, d := range out.decided {
			req := d.call.req
			if out.short[i] == nil {
				s.soldOut.Taken(req.HotelID, req.RoomTypeID, nightsOf(req.Stay))
			} else {
				s.soldOut.Learn(req.HotelID, req.RoomTypeID, out.short[i], req.Quantity, d.call.gen)
			}
		}
	}
	return out, nil
}

// batchNight is what a batch read of a night: what is left, its version.
type batchNight struct {
	left    int
	version int64
}

// lockBatchNights runs lockBatchNightsSQL: the nights found (homed here),
// keyed YYYY-MM-DD, and the price, currency and database time.
func lockBatchNights(ctx context.Context, tx pgx.Tx, hotelID, roomTypeID string, nights []time.Time, region string) (map[string]batchNight, taken, error) {
	var t taken
	rows, err := tx.Query(ctx, lockBatchNightsSQL, hotelID, roomTypeID, nights, region)
	if err != nil {
		return nil, t, fmt.Errorf("lock batch nights: %w", err)
	}
	defer rows.Close()
	state := make(map[string]batchNight, len(nights))
	for rows.Next() {
		var (
			d    time.Time
			left int32
			n    batchNight
		)
		if err := rows.Scan(&d, &left, &n.version, &t.price, &t.currency, &t.now); err != nil {
			return nil, t, fmt.Errorf("lock batch nights: %w", err)
		}
		n.left = int(left)
		state[reservation.DateOf(d).String()] = n
	}
	if err := rows.Err(); err != nil {
		return nil, t, fmt.Errorf("lock batch nights: %w", err)
	}
	return state, t, nil
}

// batchStep says how to read one queued statement's outcome.
type batchStep struct {
	kind int // stepTake, stepGuest, stepKey or stepRow
	call *holdCall
}

const (
	stepTake  = iota // takeBatchSQL: must touch every night it names
	stepGuest        // takeGuestHoldSQL: no row = a per-guest limit refused the call
	stepKey          // claimAnsweredKeySQL: no row = the key was taken already
	stepRow          // a row written; only its error matters
)

// writeBatch executes the batch's decision in one round trip: the rooms of
// every winner in one conditional UPDATE, each winner's guest count,
// reservation, event and key with its answer, each loser's key with its
// 409. It fills out.decided (with out.short: a loser's nights, nil for a
// winner).
func (s *Store) writeBatch(ctx context.Context, tx pgx.Tx, plan []*holdCall, claims []reservation.Claim, allot []reservation.Allotment,
	state map[string]batchNight, t taken, out *batchOutcome) error {
	// Per night: rooms taken and winners so far; each winner's event reports
	// what is left after it and the version its own take would have given.
	type take struct{ rooms, winners int32 }
	takes := map[string]take{}
	var nightOrder []string
	b := &pgx.Batch{}
	var steps []batchStep
	type winner struct {
		call *holdCall
		r    reservation.Reservation
		ev   event
	}
	var winners []winner
	for i, c := range plan {
		a := allot[i]
		if !a.Won {
			continue
		}
		counts := make([]reservation.NightCount, len(claims[i].Nights))
		for j, n := range claims[i].Nights {
			tk, seen := takes[n]
			if !seen {
				nightOrder = append(nightOrder, n)
			}
			tk.rooms += int32(c.req.Quantity)
			tk.winners++
			takes[n] = tk
			counts[j] = reservation.NightCount{Night: n, Available: max(a.Left[j], 0), Version: state[n].version + int64(tk.winners)}
		}
		r := heldReservation(c.req, t)
		winners = append(winners, winner{c, r, reservationInventoryEvent(reservation.EventHeld, r, counts)})
	}
	if len(winners) > 0 {
		slices.Sort(nightOrder)
		dates := make([]time.Time, len(nightOrder))
		rooms := make([]int32, len(nightOrder))
		bumps := make([]int32, len(nightOrder))
		for i, n := range nightOrder {
			d, _ := reservation.ParseDate(n)
			dates[i], rooms[i], bumps[i] = d.Time(), takes[n].rooms, takes[n].winners
		}
		b.Queue(takeBatchSQL, plan[0].req.HotelID, plan[0].req.RoomTypeID, dates, rooms, bumps, s.region)
		steps = append(steps, batchStep{kind: stepTake})
		// The guests' rows come last in the lock order; sorted by guest, so
		// that batches of two room types of one hotel never deadlock on them.
		order := slices.Clone(winners)
		slices.SortStableFunc(order, func(a, b winner) int { return strings.Compare(a.r.GuestID, b.r.GuestID) })
		for _, w := range order {
			b.Queue(takeGuestHoldSQL, w.r.HotelID, w.r.GuestID, s.region, w.r.Quantity, s.limits.Holds, s.limits.Quantity)
			steps = append(steps, batchStep{kind: stepGuest, call: w.call})
		}
	}
	wi := 0
	for i, c := range plan {
		var (
			resp  berth.Response
			short []string
			err   error
		)
		if allot[i].Won {
			w := winners[wi]
			wi++
			queueInsertReservation(b, s.region, w.r)
			steps = append(steps, batchStep{kind: stepRow})
			if err := queueEvents(c.ctx, b, s.region, w.ev); err != nil {
				return err
			}
			steps = append(steps, batchStep{kind: stepRow})
			if c.idem == nil {
				resp.Value = w.r
			} else if resp, err = renderAnswer(c.idem, w.r, nil); err != nil {
				return err
			}
		} else {
			short = allot[i].Short
			err = soldOutError(c.req.Stay, c.req.Quantity, short)
			if c.idem != nil {
				if resp, err = renderAnswer(c.idem, nil, err); err != nil {
					return err
				}
			}
		}
		if c.idem != nil {
			b.Queue(claimAnsweredKeySQL, c.req.HotelID, c.idem.Key, s.region, c.idem.Hash, resp.Status, resp.Body)
			steps = append(steps, batchStep{kind: stepKey, call: c})
		}
		out.decided = append(out.decided, decided{call: c, resp: resp, err: err})
		out.short = append(out.short, short)
	}

	br := tx.SendBatch(ctx, b)
	var redo []*holdCall
	for _, st := range steps {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			if st.kind == stepKey {
				return claimError(err)
			}
			return fmt.Errorf("record batch: %w", err)
		}
		switch {
		case st.kind == stepTake && tag.RowsAffected() != int64(len(nightOrder)):
			br.Close()
			return fmt.Errorf("batch took %d of %d nights: %w", tag.RowsAffected(), len(nightOrder), errBatchShort)
		case (st.kind == stepGuest || st.kind == stepKey) && tag.RowsAffected() == 0 && !slices.Contains(redo, st.call):
			redo = append(redo, st.call)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("record batch: %w", err)
	}
	if len(redo) > 0 {
		return &batchRedo{calls: redo}
	}
	return nil
}

// errBatchShort: the batch's UPDATE did not take what was decided on the
// locked rows. It cannot happen while the rows stay locked; if it does, the
// batch rolls back and each hold runs alone rather than oversell.
var errBatchShort = errors.New("the batch's take fell short of its decision")

func everyNight(state map[string]batchNight, nights []string) bool {
	for _, n := range nights {
		if _, ok := state[n]; !ok {
			return false
		}
	}
	return true
}
