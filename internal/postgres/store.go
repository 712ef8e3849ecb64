package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/soldout"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Store is the booking service's view of the database for one region: every
// write it makes is fenced to partitions homed in that region.
type Store struct {
	db      *DB
	region  string
	holdTTL time.Duration
	// offerTTL is how long a waitlist offer's hold waits (holdTTL unless
	// SetOfferTTL).
	offerTTL time.Duration
	limits   berth.GuestLimits
	// soldOut, when set, refuses holds of stays known to be sold out.
	soldOut *soldout.Cache

	// batchMax is the largest batch of holds of one room type (≤ 1: off).
	batchMax atomic.Int64
	batch    batchCounters
	// lanes: hold transactions of idle room types that run at once before
	// holds group (hold_group.go; 0: never).
	lanes     atomic.Int64
	groupWait atomic.Int64 // nanoseconds

	mu       sync.Mutex
	inflight map[string]int        // hotel + Idempotency-Key of holds in flight
	queues   map[string]*holdQueue // hotel + room type of hold transactions running
	// running counts the hold transactions holding a lane; groupKeys are
	// the room types waiting for a group, in arrival order (hold_group.go).
	running    int
	groupKeys  []string
	groupTimer *time.Timer // the group wait of the first room type in groupKeys
	// keyQueues are the coalesced key reads of refused holds, by hotel
	// (key_reads.go).
	keyQueues map[string]*keyQueue
	// keyReadPause replaces keyReadLinger's sleep in a test.
	keyReadPause func()
}

// NewStore returns a store that writes for region.
func NewStore(db *DB, region string, holdTTL time.Duration) *Store {
	if holdTTL <= 0 {
		holdTTL = 10 * time.Minute
	}
	s := &Store{db: db, region: region, holdTTL: holdTTL, offerTTL: holdTTL, limits: berth.DefaultGuestLimits,
		inflight: map[string]int{}, queues: map[string]*holdQueue{}, keyQueues: map[string]*keyQueue{}}
	s.batchMax.Store(DefaultHoldBatch)
	s.lanes.Store(DefaultHoldLanes)
	s.groupWait.Store(int64(DefaultGroupWait))
	return s
}

// SetGuestLimits replaces the per-guest limits (berth.DefaultGuestLimits
// until set). Call it while wiring, before the store serves requests.
func (s *Store) SetGuestLimits(l berth.GuestLimits) { s.limits = l }

// GuestLimits returns the per-guest limits the store enforces.
func (s *Store) GuestLimits() berth.GuestLimits { return s.limits }

// DB returns the underlying database.
func (s *Store) DB() *DB { return s.db }

// Region returns the region the store writes for.
func (s *Store) Region() string { return s.region }

// businessOutcome reports whether err is a committed, answerable outcome of
// a write (the transaction commits and the answer is stored with the key)
// rather than a failure that rolls everything back.
func businessOutcome(err error) bool {
	switch berth.ErrorCode(err) {
	case berth.CodeSoldOut, berth.CodeSlotTaken, berth.CodeHoldExpired, berth.CodeInvalidState, berth.CodePaymentRequired, berth.CodeNoRoomFree:
		return true
	}
	return false
}

// write runs fn in a fenced, idempotent write transaction of one partition.
//
// Order inside the transaction (see docs/adr/0003-lock-order.md): the
// placement row first (FOR SHARE: the fence), then the idempotency key,
// then the partition's rows in the order that ADR gives for its kind.
//
// The transaction is pipelined (ADR 0018): its BEGIN travels with the fence
// and the key claim, its COMMIT with the batch of writes writeIn sends last.
func (s *Store) write(ctx context.Context, kind berth.Kind, partitionID string, idem *berth.Idem,
	fn func(tx pgx.Tx, b *pgx.Batch) (any, error)) (berth.Response, error) {
	return s.writeWith(ctx, kind, partitionID, idem, nil, fn)
}

// firstReads are reads a write sends in its first round trip, behind the
// fence and the key claim: queue queues them, read reads their results in
// the same order. read runs on every attempt that reached the server
// (a replay's too, whose results go unused); fn may use what it read.
type firstReads struct {
	queue func(b *pgx.Batch)
	read  func(br pgx.BatchResults) error
}

// writeWith is write with reads of the partition sent in the round trip of
// the fence and the claim (pre; nil: none).
func (s *Store) writeWith(ctx context.Context, kind berth.Kind, partitionID string, idem *berth.Idem, pre *firstReads,
	fn func(tx pgx.Tx, b *pgx.Batch) (any, error)) (berth.Response, error) {
	var resp berth.Response
	err := s.db.InPipelinedTx(ctx, func(tx pgx.Tx) (err error) {
		resp, err = s.writeIn(ctx, tx, fenceSQL, kind, partitionID, idem, pre, fn)
		return err
	})
	if err != nil {
		return berth.Response{}, classify(err)
	}
	return resp, nil
}

// writeIn is the body of write inside the caller's transaction tx, fenced
// by the statement fence (fenceSQL, or fenceNowaitSQL when tx may already
// hold rows of the partition and so must not queue behind a move).
func (s *Store) writeIn(ctx context.Context, tx pgx.Tx, fence string, kind berth.Kind, partitionID string, idem *berth.Idem,
	reads *firstReads, fn func(tx pgx.Tx, b *pgx.Batch) (any, error)) (berth.Response, error) {
	var resp berth.Response
	// The fence and the key claim travel in one round trip, with the
	// caller's first reads behind them.
	pre := &pgx.Batch{}
	pre.Queue(fence, string(kind), partitionID)
	if idem != nil {
		pre.Queue(claimSQLOf(idem), partitionID, idem.Key, s.region, idem.Hash)
	}
	if reads != nil {
		reads.queue(pre)
	}
	br := tx.SendBatch(ctx, pre)
	var home string
	fenceErr := br.QueryRow().Scan(&home)
	var (
		claimTag pgconn.CommandTag
		claimErr error
	)
	if idem != nil {
		claimTag, claimErr = br.Exec()
	}
	var readErr error
	if reads != nil {
		readErr = reads.read(br)
	}
	if err := br.Close(); err != nil && fenceErr == nil && claimErr == nil {
		return resp, fmt.Errorf("fence and claim: %w", err)
	}
	if err := s.checkFence(kind, partitionID, home, fenceErr); err != nil {
		return resp, err
	}
	if idem != nil {
		replay, err := claimResult(ctx, tx, claimTag, claimErr, partitionID, idem)
		if err != nil {
			return resp, err
		}
		if replay != nil {
			return *replay, nil
		}
	}
	if readErr != nil {
		return resp, readErr
	}
	// Statements whose results nobody reads (inserts of the new rows,
	// outbox events, the stored response) go in one batch: one round trip,
	// the last of the transaction — in a pipelined transaction it carries
	// the COMMIT, and its Close reports the commit's outcome.
	b := &pgx.Batch{}
	value, err := fn(tx, b)
	if err != nil && (idem == nil || !businessOutcome(err)) {
		return resp, err
	}
	if idem != nil {
		if resp, err = renderAnswer(idem, value, err); err != nil {
			return resp, err
		}
		queueStoreResponse(b, partitionID, idem, resp)
	}
	if b.Len() > 0 {
		if err := sendAndCommit(ctx, tx, b).Close(); err != nil {
			return resp, fmt.Errorf("write batch: %w", err)
		}
	}
	if idem == nil {
		resp.Value = value
	}
	return resp, nil
}

// renderAnswer renders the answer a write keeps under its Idempotency-Key.
// An answer that could not be rendered (Render reports a 5xx) is a failure
// of the write, never an outcome to keep for every replay: the error rolls
// the transaction back.
func renderAnswer(idem *berth.Idem, value any, err error) (berth.Response, error) {
	var resp berth.Response
	resp.Status, resp.Body = idem.Render(value, err)
	if resp.Status >= 500 {
		return berth.Response{}, fmt.Errorf("render the answer: status %d", resp.Status)
	}
	return resp, nil
}

// fence checks, inside the write transaction, that the partition is homed in
// this store's region. The FOR SHARE lock makes a concurrent move wait for
// this transaction (or this transaction wait for the move and then refuse),
// so a stale router can never make two regions write one partition.
const fenceSQL = `SELECT home_region FROM placements WHERE kind = $1 AND partition_id = $2 FOR SHARE`

// fenceNowaitSQL is the fence for a transaction that may already hold rows
// of the partition (a hold refused after its take): waiting there for a
// move, which waits for those rows, would deadlock, so it fails at once
// with 55P03 instead (errLockBusy) and the caller starts over.
const fenceNowaitSQL = fenceSQL + ` NOWAIT`

// checkFence interprets the fence query's outcome.
func (s *Store) checkFence(kind berth.Kind, partitionID, home string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return berth.Errorf(berth.CodeNotFound, "%s %s not found", kind, partitionID)
	}
	if sqlState(err) == "55P03" {
		return fmt.Errorf("fence: %w: %w", errLockBusy, err)
	}
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if home != s.region {
		return &berth.Error{
			Code:   berth.CodeMisdirected,
			Detail: fmt.Sprintf("%s %s is homed in %s, not %s", kind, partitionID, home, s.region),
			Extra:  map[string]any{"home_region": home},
		}
	}
	return nil
}
