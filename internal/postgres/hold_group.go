package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// Hold groups: spread holds committed together when the store is busy
// (docs/adr/0033-hold-groups.md).
//
// Hot-partition batching (hold_batch.go) coalesces holds that wait for the
// same room type. Holds of different room types never wait for each
// other, so under load each still pays a transaction of its own: its
// BEGIN and COMMIT, its two round trips and the backend's wake-ups for
// them — on a small machine about as much as its statements. A group
// shares those: at most `lanes` hold transactions of idle room types run
// at once; a hold of an idle room type that finds every lane busy claims
// its room type (so that later holds of it queue behind it, as behind a
// running transaction) and waits for the next group. When a lane frees —
// or the first of them has waited DefaultGroupWait — the room types
// waiting go as one transaction (or as few as the rules below allow), each
// with its first hold:
//
//  1. BEGIN and every hold's takeHeldStaySQL, in (hotel, room type) order;
//  2. recordGroupSQL — every hold's reservation, event and key with its
//     answer, the rows recordHeldAnsweredSQL writes for a hold alone, in
//     one statement — and COMMIT
//
// — two round trips for the whole group.
// A group takes one room type per hotel, so that the rows its holds lock
// (the nights, in the partitions' order; the guest's row, last in its
// hotel's) are locked in one order by every transaction of the store.
//
// Every hold keeps its own answer, key, event and reservation. One that
// cannot be decided with the group — a night it did not get (sold out, not
// homed here, not loaded), a per-guest limit, a key claimed already or in
// flight — rolls the group back and runs alone after it (the ordinary path
// answers it), the others go again as a group; any other failure runs every
// hold alone. With a lane free a hold runs at once, alone, exactly as
// without groups: there is no timer and no wait when the store is idle.

// DefaultHoldLanes is the default number of hold transactions of idle room
// types that run at once before holds group.
const DefaultHoldLanes = 2

// SetHoldLanes sets how many hold transactions of idle room types run at
// once before further holds wait for a group (0: no groups, every such
// hold at once). Groups need batching on (SetHoldBatch > 1), whose size
// also bounds a group's.
func (s *Store) SetHoldLanes(n int) { s.lanes.Store(int64(n)) }

// HoldLanes returns the lanes of SetHoldLanes.
func (s *Store) HoldLanes() int { return int(s.lanes.Load()) }

// laneBusyLocked reports whether a hold of an idle room type must wait for a
// group; s.mu is held.
func (s *Store) laneBusyLocked() bool {
	lanes := s.HoldLanes()
	return lanes > 0 && s.running >= lanes
}

// laneDone ends a hold transaction that held a lane, and starts the groups
// that were waiting for one.
func (s *Store) laneDone() {
	s.mu.Lock()
	s.running--
	groups := s.takeGroupsLocked(false)
	s.mu.Unlock()
	for _, g := range groups {
		go s.runGroup(g)
	}
}

// DefaultGroupWait bounds how long a hold waits for a group: a lane may be
// held by a transaction that waits for a row lock (lock_timeout: seconds),
// and the holds of other room types must not wait for it. When the first
// room type of a group has waited this long, the group goes without a free
// lane.
const DefaultGroupWait = 5 * time.Millisecond

// SetHoldGroupWait sets the bound of DefaultGroupWait (> 0).
func (s *Store) SetHoldGroupWait(d time.Duration) { s.groupWait.Store(int64(d)) }

// waitForGroupLocked puts a room type in line for the next group; s.mu is
// held.
func (s *Store) waitForGroupLocked(key string) {
	s.groupKeys = append(s.groupKeys, key)
	if s.groupTimer == nil {
		s.groupTimer = time.AfterFunc(time.Duration(s.groupWait.Load()), s.groupWaited)
	}
}

// groupWaited sends the groups whose first room type waited the group wait.
func (s *Store) groupWaited() {
	s.mu.Lock()
	s.groupTimer = nil
	groups := s.takeGroupsLocked(true)
	s.mu.Unlock()
	for _, g := range groups {
		go s.runGroup(g)
	}
}

// holdGroup is one group's holds, each the first of its room type.
type holdGroup struct{ calls []*holdCall }

// takeGroupsLocked sends every room type waiting for a group, when a lane
// is free or force (the group wait is over); s.mu is held. They go in as
// few groups as the rules allow (one room type per hotel, the batch size),
// each taking a lane — so a hold waits for a group at most until one hold
// transaction ends or the group wait is over, even when all that wait are
// room types of one hotel. A room type's first hold goes with the group;
// holds of it that queued behind that one stay queued and follow the group
// as the room type's next batch (nextBatch). A room type whose holds all
// left (their requests ended) is idle again.
func (s *Store) takeGroupsLocked(force bool) []holdGroup {
	if len(s.groupKeys) == 0 || (!force && s.running >= max(s.HoldLanes(), 1)) {
		return nil
	}
	if s.groupTimer != nil {
		s.groupTimer.Stop()
		s.groupTimer = nil
	}
	var out []holdGroup
	keys := s.groupKeys
	s.groupKeys = nil
	room := max(s.HoldBatch(), 1)
	for len(keys) > 0 {
		var (
			g      holdGroup
			rest   []string
			hotels = map[string]bool{}
		)
		for _, key := range keys {
			q := s.queues[key]
			hotel, _, _ := strings.Cut(key, "\x00")
			switch {
			case len(q.waiting) == 0:
				delete(s.queues, key)
			case len(g.calls) == room || hotels[hotel]:
				rest = append(rest, key) // another group's
			default:
				hotels[hotel] = true
				g.calls = append(g.calls, q.waiting[0])
				q.waiting = slices.Delete(q.waiting, 0, 1)
			}
		}
		keys = rest
		if len(g.calls) > 0 {
			s.running++
			out = append(out, g)
		}
	}
	return out
}

// runGroup decides a group's holds: together where it can, alone where it
// must. Every hold is finished exactly once, also when something panics;
// then its room types take their next batches and its lane is free.
func (s *Store) runGroup(g holdGroup) {
	defer s.laneDone()
	defer func() {
		for _, c := range g.calls {
			s.nextBatch(queueKey(c.req))
		}
	}()
	defer finishOnPanic("hold group", g.calls)
	pending := s.refuseQueued(g.calls)
	if len(pending) == 0 {
		return
	}
	// A group holds one room type per hotel, so no two of its holds share
	// a key's row (keys are per hotel) or a guest's; a webhook's key goes
	// alone, as in a batch.
	var group, alone []*holdCall
	for _, c := range pending {
		if c.idem != nil && c.idem.Webhook {
			alone = append(alone, c)
			continue
		}
		group = append(group, c)
	}
	// The group's transaction is every hold's: none's cancellation may
	// abort it (statement_timeout and lock_timeout still bound it).
	ctx := context.WithoutCancel(pending[0].ctx)
	for len(group) > 1 {
		out, err := s.holdGrouped(ctx, group)
		var (
			redo *batchRedo
			key  *errGroupKey
		)
		if errors.As(err, &key) {
			redo = &batchRedo{calls: s.groupKeyHolds(ctx, key.keyed)}
		}
		if redo != nil || errors.As(err, &redo) {
			// Rolled back: run it again without the holds that must go alone.
			alone = append(alone, redo.calls...)
			group = slices.DeleteFunc(group, func(c *holdCall) bool { return slices.Contains(redo.calls, c) })
			continue
		}
		if err != nil {
			// Whatever failed, each hold now runs alone: the one that caused
			// it fails by itself, the others are decided as without groups.
			alone = append(alone, group...)
			group = nil
			break
		}
		s.batch.groups.Add(1)
		s.batch.grouped.Add(int64(len(out)))
		for _, d := range out {
			d.call.finish(d.resp, d.err)
		}
		group = nil
	}
	alone = append(group, alone...) // a group of one is a hold alone
	if len(alone) == 0 {
		return
	}
	// Each of another room type: they need not wait for each other. The
	// first runs in this goroutine, the others in their own.
	var wg sync.WaitGroup
	for _, c := range alone[1:] {
		wg.Go(func() { s.finishAlone(c) })
	}
	s.finishAlone(alone[0])
	wg.Wait()
}

// finishAlone decides c in a transaction of its own and finishes it, also
// when that panics: in a goroutine of its own, a panic is beyond the
// group's finishOnPanic.
func (s *Store) finishAlone(c *holdCall) {
	defer func() {
		if p := recover(); p != nil {
			c.finish(berth.Response{}, fmt.Errorf("hold: panic: %v", p))
		}
	}()
	c.finish(s.holdAlone(c.ctx, c.req, c.idem, c.gen))
}

// holdGrouped runs calls (each of another hotel) in one transaction of two
// round trips: BEGIN and every take, then every record and COMMIT. Calls
// that cannot be decided with the others make it a batchRedo.
func (s *Store) holdGrouped(ctx context.Context, calls []*holdCall) ([]decided, error) {
	// The lock order: partitions by (hotel, room type), as every
	// transaction of the store locks them.
	calls = slices.Clone(calls)
	slices.SortFunc(calls, func(a, b *holdCall) int {
		return cmp.Or(strings.Compare(a.req.HotelID, b.req.HotelID), strings.Compare(a.req.RoomTypeID, b.req.RoomTypeID))
	})
	var (
		out   []decided
		lefts [][]reservation.NightCount
	)
	err := s.db.InPipelinedTx(ctx, func(tx pgx.Tx) error {
		out, lefts = out[:0], lefts[:0]
		b := &pgx.Batch{}
		for _, c := range calls {
			queueHeldTake(b, s.region, c.req, s.limits)
		}
		takes := make([]taken, len(calls))
		var redo []*holdCall
		br := tx.SendBatch(ctx, b)
		for i, c := range calls {
			t, counted, err := readHeldTake(br, c.req)
			if err != nil {
				br.Close()
				return err
			}
			if len(t.nights) < c.req.Stay.Nights() || !counted {
				redo = append(redo, c) // the ordinary path answers it
			}
			takes[i] = t
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("take nights: %w", err)
		}
		if len(redo) > 0 {
			return &batchRedo{calls: redo}
		}
		var (
			rec   groupRecord
			keyed []*holdCall
		)
		for i, c := range calls {
			r, e, resp, err := s.heldRecord(c.req, c.idem, takes[i])
			if err != nil {
				return err
			}
			if err := rec.add(c.ctx, r, e, c.idem, resp); err != nil {
				return err
			}
			out = append(out, decided{call: c, resp: resp})
			lefts = append(lefts, takes[i].counts)
			if c.idem != nil {
				keyed = append(keyed, c)
			}
		}
		b = &pgx.Batch{}
		rec.queue(b, s.region)
		br = sendAndCommit(ctx, tx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			if len(keyed) > 0 && (keyTaken(err) || sqlState(err) == "55P03") {
				// A key was claimed already (its hold replays alone) or is
				// held by a duplicate in flight (its hold waits alone):
				// which one is found after the rollback.
				return &errGroupKey{keyed: keyed, err: err}
			}
			return fmt.Errorf("record group: %w", err)
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("record group: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Committed: the sold-out cache learns what each hold took, as alone.
	for i, d := range out {
		s.learnFromWin(d.call.req, lefts[i], d.call.gen)
	}
	return out, nil
}
