package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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
const DefaultHoldBatch = 64

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

// finishOnPanic, deferred by what decides calls (a batch, a group),
// finishes every call not finished yet with the panic as its error, so
// that none waits for ever; what names the decider.
func finishOnPanic(what string, calls []*holdCall) {
	p := recover()
	if p == nil {
		return
	}
	err := fmt.Errorf("%s: panic: %v", what, p)
	for _, c := range calls {
		select {
		case <-c.done:
		default:
			c.finish(berth.Response{}, err)
		}
	}
}

// queueKey names a hold's room type in the store's queues.
func queueKey(req reservation.HoldRequest) string { return req.HotelID + "\x00" + req.RoomTypeID }

// holdQueue is a busy room type: a hold transaction runs, these wait.
type holdQueue struct{ waiting []*holdCall }

// BatchStats counts what batching did since the store started.
type BatchStats struct {
	Batches int64 // batch transactions committed
	Batched int64 // holds decided in them
	Alone   int64 // holds of a batch that ran alone after it
	Reruns  int64 // batches run again exact after a guard of their committing round trip fired
	Groups  int64 // group transactions committed (hold_group.go)
	Grouped int64 // holds decided in them
	// The committed batch transactions' time, summed by phase: the round
	// trip that begins the transaction and locks the nights (Lock), the
	// decision and the writes built in Go (Decide), and the round trip that
	// writes and commits (Commit). The room type's nights are locked for
	// all of Decide and Commit. Divided by Batches, a batch's cycle.
	Lock, Decide, Commit time.Duration
	// The statements that read the keys of holds the sold-out cache refused
	// (KeyReads) and the keys they read (KeysRead): coalesced, so a flash
	// sale's losers ask many keys per statement (key_reads.go).
	KeyReads, KeysRead int64
}

type batchCounters struct {
	batches, batched, alone, reruns, groups, grouped atomic.Int64
	lock, decide, commit                             atomic.Int64 // ns
	keyReads, keysRead                               atomic.Int64
}

// SetHoldBatch sets the largest batch of holds of one room type (0 or 1:
// batching off, every hold its own transaction); holds arriving after it
// follow it.
func (s *Store) SetHoldBatch(n int) { s.batchMax.Store(int64(n)) }

// HoldBatch returns the largest batch of holds of one room type (≤ 1: off).
func (s *Store) HoldBatch() int { return int(s.batchMax.Load()) }

// HoldBatchStats returns what batching did so far.
func (s *Store) HoldBatchStats() BatchStats {
	return BatchStats{Batches: s.batch.batches.Load(), Batched: s.batch.batched.Load(), Alone: s.batch.alone.Load(),
		Reruns: s.batch.reruns.Load(), Groups: s.batch.groups.Load(), Grouped: s.batch.grouped.Load(),
		Lock: time.Duration(s.batch.lock.Load()), Decide: time.Duration(s.batch.decide.Load()),
		Commit: time.Duration(s.batch.commit.Load()), KeyReads: s.batch.keyReads.Load(), KeysRead: s.batch.keysRead.Load()}
}

// holdQueued runs a hold through its room type's queue: at once and alone
// when the room type is idle and a lane is free, with the next group when
// the room type is idle and every lane busy (hold_group.go), else with the
// room type's next batch.
func (s *Store) holdQueued(ctx context.Context, req reservation.HoldRequest, idem *berth.Idem, gen uint64) (berth.Response, error) {
	key := queueKey(req)
	s.mu.Lock()
	q, busy := s.queues[key]
	if !busy {
		q = &holdQueue{}
		s.queues[key] = q
		if !s.laneBusyLocked() {
			s.running++
			s.mu.Unlock()
			defer s.laneDone()
			defer s.nextBatch(key)
			return s.holdAlone(ctx, req, idem, gen)
		}
		// It waits for the next group; holds of its room type queue behind it.
		s.waitForGroupLocked(key)
	}
	c := &holdCall{ctx: ctx, req: req, idem: idem, gen: gen, done: make(chan struct{})}
	q.waiting = append(q.waiting, c)
	s.mu.Unlock()
	select {
	case <-c.done:
		return c.resp, c.err
	case <-ctx.Done():
		if s.leaveQueue(key, c) {
			return berth.Response{}, classify(fmt.Errorf("hold: %w", ctx.Err()))
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
	n := min(len(q.waiting), max(s.HoldBatch(), 1))
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
	defer finishOnPanic("hold batch", calls)
	pending := s.refuseQueued(calls)
	if len(pending) == 0 {
		return
	}
	var batch, alone []*holdCall
	keys := map[string]bool{}
	guests := map[string]bool{}
	for _, c := range pending {
		switch {
		case c.idem != nil && (keys[c.idem.Key] || c.idem.Webhook):
			alone = append(alone, c) // a duplicate: it replays after the batch
		case guests[c.req.GuestID]:
			// A guest's second hold in one batch: its count depends on the
			// first's, so it is decided after it.
			alone = append(alone, c)
		default:
			if c.idem != nil {
				keys[c.idem.Key] = true
			}
			guests[c.req.GuestID] = true
			batch = append(batch, c)
		}
	}
	// The batch's transaction is every call's: none's cancellation may
	// abort it (statement_timeout and lock_timeout still bound it).
	ctx := context.WithoutCancel(pending[0].ctx)
	exact := false
	for len(batch) > 1 {
		out, err := s.holdBatch(ctx, batch, exact)
		// A guard fired in the committing round trip (a key taken, a guest
		// at a limit): nothing committed; the same batch again, its writes
		// checked in Go before its COMMIT, says which holds must go alone.
		// (An exact run sends no guard; were one to fail so, it is any
		// other failure below.)
		if !exact && errors.Is(err, errBatchGuard) {
			exact = true
			s.batch.reruns.Add(1)
			continue
		}
		exact = false
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
		if len(out.decided) > 0 {
			s.batch.batches.Add(1)
			s.batch.batched.Add(int64(len(out.decided)))
			s.batch.lock.Add(int64(out.locked.Sub(out.began)))
			s.batch.decide.Add(int64(out.sent.Sub(out.locked)))
			s.batch.commit.Add(int64(out.ended.Sub(out.sent)))
		}
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
	// When the committing attempt began, had its nights locked, sent its
	// writes and ended (BatchStats' phases).
	began, locked, sent, ended time.Time
}

// holdBatch runs one batch transaction: the nights locked and read, the
// decision (reservation.Allot), then everything written in one round trip
// — with the COMMIT, unless exact (writeBatch).
func (s *Store) holdBatch(ctx context.Context, calls []*holdCall, exact bool) (batchOutcome, error) {
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
	err := s.db.InPipelinedTx(ctx, func(tx pgx.Tx) error {
		out = batchOutcome{began: time.Now()}
		state, t, err := lockBatchNights(ctx, tx, first.HotelID, first.RoomTypeID, nights, s.region)
		if err != nil {
			return err
		}
		out.locked = time.Now()
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
		return s.writeBatch(ctx, tx, plan, claims, reservation.Allot(left, claims), state, t, exact, &out)
	})
	if err != nil {
		return batchOutcome{}, err
	}
	out.ended = time.Now()
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

// refuseQueued answers the queued holds the sold-out cache now refuses —
// the transaction they waited for sold their nights out, or refused a
// batch-mate for them — as a hold arriving now would be answered
// (refuseKnownSoldOut: its key still read), and returns the others in order. Their
// keys are asked together, so they are read in one statement (key_reads.go)
// rather than the first alone and the others after it. Without it a flash
// sale's first losers, queued behind the winner before anything was known,
// each went through a batch transaction to learn what the cache knew.
func (s *Store) refuseQueued(calls []*holdCall) []*holdCall {
	if s.soldOut == nil {
		return calls
	}
	refused := make([]bool, len(calls))
	type keyed struct {
		i       int
		refusal error
		read    *keyCall
	}
	var (
		reads   []keyed
		byHotel = map[string][]*keyCall{}
		first   = map[string]context.Context{}
	)
	for i, c := range calls {
		short := s.soldOut.Refuses(c.req.HotelID, c.req.RoomTypeID, nightsOf(c.req.Stay), c.req.Quantity)
		if len(short) == 0 {
			continue
		}
		// Hold counted this call among the running holds of its key.
		refusal, ok := s.refusalOf(c.req, c.idem, short, 1)
		if !ok {
			continue // on to the batch
		}
		if c.idem == nil {
			refused[i] = true
			c.finish(berth.Response{}, refusal)
			continue
		}
		read := newKeyCall(c.idem.Key)
		reads = append(reads, keyed{i, refusal, read})
		if first[c.req.HotelID] == nil {
			first[c.req.HotelID] = c.ctx
		}
		byHotel[c.req.HotelID] = append(byHotel[c.req.HotelID], read)
	}
	for hotelID, keys := range byHotel {
		s.submitKeys(first[hotelID], hotelID, keys)
	}
	var wg sync.WaitGroup
	for _, r := range reads {
		c := calls[r.i]
		refused[r.i] = true
		wg.Go(func() {
			finished := false
			defer func() {
				// As in runBatch: every call is finished, also on a panic.
				if p := recover(); p != nil && !finished {
					c.finish(berth.Response{}, fmt.Errorf("hold: panic: %v", p))
				}
			}()
			ans, err := r.read.wait(c.ctx)
			resp, err := refusalAnswer(c.idem, r.refusal, ans, err)
			finished = true
			c.finish(resp, err)
		})
	}
	wg.Wait()
	pending := make([]*holdCall, 0, len(calls))
	for i, c := range calls {
		if !refused[i] {
			pending = append(pending, c)
		}
	}
	return pending
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
	// A batch of one, so that the pipelined transaction's BEGIN goes with it.
	b := &pgx.Batch{}
	b.Queue(lockBatchNightsSQL, hotelID, roomTypeID, nights, region)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
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
	rows.Close()
	if err := br.Close(); err != nil {
		return nil, t, fmt.Errorf("lock batch nights: %w", err)
	}
	return state, t, nil
}

// The batch's rows, one statement per table whatever the batch's size:
// every row one request's, each request's answer its own.

// countBatchGuestsSQL is takeGuestHoldSQL for every winner of a batch (each
// guest once), the rows locked in guest order — last in the lock order, and
// sorted, so that batches of two room types of one hotel never deadlock on
// them. It returns the guests it counted; a guest missing was refused by a
// per-guest limit.
const countBatchGuestsSQL = `
INSERT INTO guest_holds AS g (hotel_id, guest_id, home_region, holds, rooms)
SELECT $1::UUID, x.guest, $2::TEXT, 1, x.qty FROM unnest($3::TEXT[], $4::INT4[]) AS x(guest, qty)
WHERE 1 <= $5::INT4 AND x.qty <= $6::INT4
ORDER BY x.guest
ON CONFLICT (hotel_id, guest_id) DO UPDATE SET holds = g.holds + 1, rooms = g.rooms + excluded.rooms
WHERE g.holds + 1 <= $5::INT4 AND g.rooms + excluded.rooms <= $6::INT4
RETURNING g.guest_id`

// insertBatchReservationsSQL records every winner's held reservation
// (insertReservationSQL, one row per winner).
const insertBatchReservationsSQL = `
INSERT INTO reservations (hotel_id, reservation_id, home_region, room_type_id, guest_id, check_in, check_out,
		quantity, status, hold_expires_at, total_price_cents, currency, contact_email, contact_phone, version, created_at, updated_at,
		contact_push_token)
SELECT $1::UUID, r.id, $2::TEXT, $3::UUID, r.guest, r.check_in, r.check_out, r.qty, 'held', $4::TIMESTAMPTZ, r.price, $5::TEXT,
       NULLIF(r.email, ''), NULLIF(r.phone, ''), 1, $6::TIMESTAMPTZ, $6::TIMESTAMPTZ, NULLIF(r.push, '')
FROM unnest($7::TEXT[]::UUID[], $8::TEXT[], $9::DATE[], $10::DATE[], $11::INT4[], $12::INT8[], $13::TEXT[], $14::TEXT[], $15::TEXT[])
     AS r(id, guest, check_in, check_out, qty, price, email, phone, push)`

// insertBatchEventsSQL writes every winner's reservation.held event
// (insertOutboxSQL, one row per winner, seq in arrival order).
const insertBatchEventsSQL = `
INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type, aggregate_id, aggregate_version, seq, payload, trace_context)
SELECT $1::UUID, e.id, $2::TEXT, $3::TEXT, $4::TEXT, e.aggregate, e.version, e.seq, e.payload::JSON, e.trace
FROM unnest($5::TEXT[]::UUID[], $6::TEXT[]::UUID[], $7::INT8[], $8::INT4[], $9::TEXT[], $10::TEXT[]) AS e(id, aggregate, version, seq, payload, trace)`

// claimBatchKeysSQL is claimAnsweredKeySQL for every request of a batch
// with a key (each key once): a winner's with its 201, a loser's with its
// 409. It returns the keys it claimed; a key missing was claimed already
// (a replay, or a duplicate that committed first).
const claimBatchKeysSQL = `
INSERT INTO idempotency_keys (partition_id, idem_key, home_region, request_hash, response_status, response_body)
SELECT $1::UUID, k.key, $2::TEXT, k.hash, k.status, k.body
FROM unnest($3::TEXT[], $4::TEXT[], $5::INT4[], $6::BYTEA[]) AS k(key, hash, status, body)
ORDER BY k.key
ON CONFLICT (partition_id, idem_key) DO NOTHING
RETURNING idem_key`

// The guarded forms of the batch's checked statements (ADR 0030). Unless
// exact, a batch's writes travel with its COMMIT (sendAndCommit), as a
// lone hold's do (ADR 0018), so nothing may need a decision in Go after
// them: what writeBatch checks in Go — the take touched every night, every
// winner's guest was counted, every key was claimed — is checked in the
// server too. Each form divides by zero (SQLSTATE 22012) when its
// statement's rows fall short of $7, which fails it, so the COMMIT queued
// behind never runs; the batch is then run again exact, which finds out
// who must go alone. The divisor depends on the statement's own rows, so
// no planner can fold the division into an error while planning, and an
// aggregate without GROUP BY returns its row, so the check runs also when
// the statement wrote nothing.
const (
	takeBatchGuardedSQL = `WITH u AS (` + takeBatchSQL + `
RETURNING 1)
SELECT 1 / CASE WHEN count(*) <> $7 THEN 0 ELSE 1 END FROM u`
	countBatchGuestsGuardedSQL = `WITH g AS (` + countBatchGuestsSQL + `)
SELECT 1 / CASE WHEN count(*) <> $7 THEN 0 ELSE 1 END FROM g`
	claimBatchKeysGuardedSQL = `WITH k AS (` + claimBatchKeysSQL + `)
SELECT 1 / CASE WHEN count(*) <> $7 THEN 0 ELSE 1 END FROM k`
)

// queueChecked queues one of the batch's checked statements: sql with
// args when exact (checked in Go after it), else its guarded form, which
// fails in the server unless its rows are want.
func queueChecked(b *pgx.Batch, exact bool, sql, guardedSQL string, want int, args ...any) {
	if exact {
		b.Queue(sql, args...)
		return
	}
	b.Queue(guardedSQL, append(args, int64(want))...)
}

// errBatchGuard: a guarded statement of a batch's committing round trip
// fell short; nothing committed.
var errBatchGuard = errors.New("a guard of the batch's committing round trip fired")

// guarded wraps err in errBatchGuard when it is a guarded statement's
// check failing.
func guarded(err error) error {
	if sqlState(err) == "22012" {
		return fmt.Errorf("%w: %w", errBatchGuard, err)
	}
	return err
}

// writeBatch executes the batch's decision in one round trip: the rooms of
// every winner in one conditional UPDATE, then the winners' guest counts,
// reservations and events and every request's key with its own answer, a
// statement per table — with the COMMIT behind them in the same round
// trip and the checks guarded in the server, or, when exact, without it,
// checked in Go. It fills out.decided (with out.short: a loser's nights,
// nil for a winner); exact, calls a per-guest limit refused or whose key
// was taken make it a batchRedo.
func (s *Store) writeBatch(ctx context.Context, tx pgx.Tx, plan []*holdCall, claims []reservation.Claim, allot []reservation.Allotment,
	state map[string]batchNight, t taken, exact bool, out *batchOutcome) error {
	hotelID, roomTypeID := plan[0].req.HotelID, plan[0].req.RoomTypeID
	// Per night: rooms taken and winners so far; each winner's event reports
	// what is left after it and the version its own take would have given.
	type take struct{ rooms, winners int32 }
	takes := map[string]take{}
	var (
		res struct {
			ids, guests, emails, phones, pushes []string
			ins, outs                           []time.Time
			qtys                                []int32
			prices                              []int64
		}
		ev struct {
			ids, aggregates, payloads []string
			versions                  []int64
			seqs                      []int32
			traces                    []*string
		}
		keys struct {
			keys, hashes []string
			statuses     []int32
			bodies       [][]byte
		}
		guestOf = map[string]*holdCall{}
		keyOf   = map[string]*holdCall{}
	)
	for i, c := range plan {
		var (
			resp  berth.Response
			short []string
			err   error
		)
		if a := allot[i]; a.Won {
			counts := make([]reservation.NightCount, len(claims[i].Nights))
			for j, n := range claims[i].Nights {
				tk := takes[n]
				tk.rooms += int32(c.req.Quantity)
				tk.winners++
				takes[n] = tk
				counts[j] = reservation.NightCount{Night: n, Available: max(a.Left[j], 0), Version: state[n].version + int64(tk.winners)}
			}
			r := heldReservation(c.req, t)
			res.ids, res.guests, res.emails, res.phones = append(res.ids, r.ID), append(res.guests, r.GuestID),
				append(res.emails, r.ContactEmail), append(res.phones, r.ContactPhone)
			res.pushes = append(res.pushes, r.ContactPushToken)
			res.ins, res.outs = append(res.ins, r.CheckIn.Time()), append(res.outs, r.CheckOut.Time())
			res.qtys, res.prices = append(res.qtys, int32(r.Quantity)), append(res.prices, r.TotalPriceCents)
			e := reservationInventoryEvent(reservation.EventHeld, r, counts)
			payload, err := eventPayload(e)
			if err != nil {
				return err
			}
			ev.ids, ev.aggregates, ev.payloads = append(ev.ids, newEventID()), append(ev.aggregates, e.aggregateID), append(ev.payloads, string(payload))
			ev.versions, ev.seqs, ev.traces = append(ev.versions, e.version), append(ev.seqs, int32(len(ev.seqs))), append(ev.traces, traceContext(c.ctx))
			guestOf[r.GuestID] = c
			if c.idem == nil {
				resp.Value = r
			} else if resp, err = renderAnswer(c.idem, r, nil); err != nil {
				return err
			}
		} else {
			short = a.Short
			err = soldOutError(c.req.Stay, c.req.Quantity, short)
			if c.idem != nil {
				if resp, err = renderAnswer(c.idem, nil, err); err != nil {
					return err
				}
			}
		}
		if c.idem != nil {
			keys.keys, keys.hashes = append(keys.keys, c.idem.Key), append(keys.hashes, c.idem.Hash)
			keys.statuses, keys.bodies = append(keys.statuses, int32(resp.Status)), append(keys.bodies, resp.Body)
			keyOf[c.idem.Key] = c
		}
		out.decided = append(out.decided, decided{call: c, resp: resp, err: err})
		out.short = append(out.short, short)
	}

	b := &pgx.Batch{}
	nights := make([]string, 0, len(takes))
	for n := range takes {
		nights = append(nights, n)
	}
	if len(nights) > 0 {
		slices.Sort(nights)
		dates := make([]time.Time, len(nights))
		rooms := make([]int32, len(nights))
		bumps := make([]int32, len(nights))
		for i, n := range nights {
			d, err := reservation.ParseDate(n)
			if err != nil {
				return err
			}
			dates[i], rooms[i], bumps[i] = d.Time(), takes[n].rooms, takes[n].winners
		}
		queueChecked(b, exact, takeBatchSQL, takeBatchGuardedSQL, len(nights), hotelID, roomTypeID, dates, rooms, bumps, s.region)
		queueChecked(b, exact, countBatchGuestsSQL, countBatchGuestsGuardedSQL, len(guestOf),
			hotelID, s.region, res.guests, res.qtys, s.limits.Holds, s.limits.Quantity)
		b.Queue(insertBatchReservationsSQL, hotelID, s.region, roomTypeID, t.expiresAt.UTC(), t.currency, t.now.UTC(),
			res.ids, res.guests, res.ins, res.outs, res.qtys, res.prices, res.emails, res.phones, res.pushes)
		b.Queue(insertBatchEventsSQL, hotelID, s.region, string(berth.KindHotel), reservation.EventHeld,
			ev.ids, ev.aggregates, ev.versions, ev.seqs, ev.payloads, ev.traces)
	}
	if len(keys.keys) > 0 {
		queueChecked(b, exact, claimBatchKeysSQL, claimBatchKeysGuardedSQL, len(keyOf),
			hotelID, s.region, keys.keys, keys.hashes, keys.statuses, keys.bodies)
	}
	out.sent = time.Now()
	if b.Len() == 0 {
		return nil
	}
	var br pgx.BatchResults
	if exact {
		br = tx.SendBatch(ctx, b)
	} else {
		br = sendAndCommit(ctx, tx, b)
	}
	defer br.Close()
	var redo []*holdCall
	if len(nights) > 0 {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("take batch nights: %w", guarded(err))
		}
		if exact {
			if tag.RowsAffected() != int64(len(nights)) {
				return fmt.Errorf("batch took %d of %d nights: %w", tag.RowsAffected(), len(nights), errBatchShort)
			}
			counted, err := returned(br)
			if err != nil {
				return fmt.Errorf("count batch guests: %w", err)
			}
			for g, c := range guestOf {
				if !counted[g] {
					redo = append(redo, c) // a per-guest limit refused it
				}
			}
		} else if _, err := br.Exec(); err != nil {
			return fmt.Errorf("count batch guests: %w", guarded(err))
		}
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("record batch: %w", err)
			}
		}
	}
	if len(keys.keys) > 0 {
		if exact {
			claimed, err := returned(br)
			if err != nil {
				return claimError(err)
			}
			for k, c := range keyOf {
				if !claimed[k] && !slices.Contains(redo, c) {
					redo = append(redo, c) // taken already: it replays
				}
			}
		} else if _, err := br.Exec(); err != nil {
			if err = guarded(err); errors.Is(err, errBatchGuard) {
				return fmt.Errorf("claim batch keys: %w", err)
			}
			return claimError(err)
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

// returned reads the next statement's single text column into a set.
func returned(br pgx.BatchResults) (map[string]bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		set[v] = true
	}
	rows.Close()
	return set, rows.Err()
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
