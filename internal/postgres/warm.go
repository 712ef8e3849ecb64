package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A pool opens its connections on demand, and a new connection's server
// backend has empty catalog caches: the first statement naming a table
// looks the table, its columns, types, indexes and their statistics up in
// the catalog — a few ms of the server's CPU per backend for the hold's
// statements, against a tenth of that once they are cached. A service just
// started pays it on the first requests, which on a flash sale of a fresh
// platform is the one request that wins while the losers pile up behind it
// (docs/PERFORMANCE.md, "A fresh platform's first sale"). So a pool given
// Options.Warm has every connection it opens plan those statements first
// (AfterConnect), and the service opens its minimum of connections that way
// (DB.Warm) before it reports ready.

// planAll has the server plan every statement without running it
// (EXPLAIN, every parameter NULL), in one round trip: the parse looks up
// what a statement names, the plan the indexes it may use and their
// statistics. EXPLAIN without ANALYZE executes nothing (data-modifying
// CTEs included), so it writes and locks nothing, and nothing is prepared
// under a name: the client's statement cache is left as it was (it
// prepares each statement on its first use, now against warm caches).
func planAll(ctx context.Context, c *pgconn.PgConn, stmts []string) error {
	if len(stmts) == 0 {
		return nil
	}
	p := c.StartPipeline(ctx)
	for _, sql := range stmts {
		p.SendQueryParams("EXPLAIN "+sql, make([][]byte, params(sql)), nil, nil, nil)
	}
	if err := p.Sync(); err != nil {
		_ = p.Close()
		return fmt.Errorf("plan statements: %w", err)
	}
	var first error
	for _, sql := range stmts {
		res, err := p.GetResults()
		if rr, ok := res.(*pgconn.ResultReader); ok && err == nil {
			_, err = rr.Close()
		}
		if err != nil {
			first = fmt.Errorf("plan %.60q: %w", sql, err)
			break // the server skips the rest until the Sync
		}
	}
	if err := p.Close(); err != nil && first == nil {
		first = fmt.Errorf("plan statements: %w", err)
	}
	return first
}

// params is the number of parameters of sql: its highest $n.
func params(sql string) int {
	n := 0
	for _, m := range paramRE.FindAllStringSubmatch(sql, -1) {
		if v, err := strconv.Atoi(m[1]); err == nil && v > n {
			n = v
		}
	}
	return n
}

var paramRE = regexp.MustCompile(`\$([0-9]+)`)

// warmer plans Options.Warm on each connection the pool opens.
type warmer struct {
	stmts []string
	// failed counts connections whose warm-up failed; they serve anyway
	// (a statement then is planned on its first use, as without warming).
	failed atomic.Int64
}

// afterConnect is the pool's AfterConnect. It never fails the connection:
// a cold connection is slower, not wrong.
func (w *warmer) afterConnect(ctx context.Context, c *pgx.Conn) error {
	if err := planAll(ctx, c.PgConn(), w.stmts); err != nil {
		w.failed.Add(1)
	}
	return nil
}

// WarmStats is what a warm-up did.
type WarmStats struct {
	// Conns is how many connections are open and warm, Statements how
	// many statements each has planned.
	Conns, Statements int
}

// Warm opens n connections of the pool at once (capped at its size) and
// plans Options.Warm on each, reporting the first failure (e.g. a schema
// older than the code: the caller retries once the migrations ran). With
// Options.MinConns at least n the pool keeps them open; a connection it
// opens later, to grow or to replace one, plans them as it connects.
func (db *DB) Warm(ctx context.Context, n int) (WarmStats, error) {
	n = min(n, int(db.pool.Config().MaxConns))
	if n < 1 || db.warm == nil {
		return WarmStats{}, nil
	}
	// Hold every connection until all are acquired, so the pool opens n of
	// them rather than handing one out n times.
	held := make([]*pgxpool.Conn, n)
	defer func() {
		for _, c := range held {
			if c != nil {
				c.Release()
			}
		}
	}()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range held {
		wg.Go(func() {
			c, err := db.pool.Acquire(ctx)
			if err != nil {
				errs[i] = fmt.Errorf("acquire: %w", err)
				return
			}
			held[i] = c
			// Planned already if the pool opened it just now; a connection
			// it had (the engine check's) has not, and a second plan on a
			// warm one is cheap.
			errs[i] = planAll(ctx, c.Conn().PgConn(), db.warm.stmts)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return WarmStats{}, fmt.Errorf("warm the pool: %w", err)
	}
	return WarmStats{Conns: n, Statements: len(db.warm.stmts)}, nil
}

// WarmFailures counts the connections opened since Open whose warm-up
// failed (they served cold).
func (db *DB) WarmFailures() int64 {
	if db.warm == nil {
		return 0
	}
	return db.warm.failed.Load()
}

// HoldStatements returns every statement a hold may send: the lone hold,
// its refusal, the batch, the key reads of refusals from the sold-out
// cache, a replay's read of its key. It is what a booking service warms
// its pool with (Options.Warm); TestWarmCoversTheHoldPath fails when the
// hold path sends one not here.
func HoldStatements() []string {
	return []string{
		takeHeldStaySQL, recordHeldSQL, recordHeldAnsweredSQL, insertAnsweredKeySQL,
		fenceSQL, fenceNowaitSQL, claimKeySQL, storeResponseSQL, nightsWithRoomsSQL, storedAnswersSQL,
		lockBatchNightsSQL, takeBatchSQL, countBatchGuestsSQL, insertBatchReservationsSQL, insertBatchEventsSQL, claimBatchKeysSQL,
		takeBatchGuardedSQL, countBatchGuestsGuardedSQL, claimBatchKeysGuardedSQL, storedKeyAnswerSQL, recordGroupSQL, claimedKeysSQL,
	}
}

// ErrNotWarm is a readiness check's answer until WarmUntilDone succeeded.
var ErrNotWarm = errors.New("connections not warmed yet")

// WarmRetry is the backoff between the attempts of WarmUntilDone.
type WarmRetry struct{ First, Max time.Duration }

// WarmUntilDone warms n connections (Warm), retrying with backoff until it
// succeeds (true) or ctx ends (false). report is told of every attempt:
// its stats, or its error and the wait before the next one. A service runs
// it in the background and reports ready only once it returned true, so a
// database briefly away at start delays readiness, never kills the service.
func (db *DB) WarmUntilDone(ctx context.Context, n int, retry WarmRetry, report func(attempt int, st WarmStats, took, wait time.Duration, err error)) bool {
	wait := retry.First
	for attempt := 1; ; attempt++ {
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		st, err := db.Warm(actx, n)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		report(attempt, st, time.Since(start), wait, err)
		if err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, retry.Max)
	}
}

// LogWarmUp is a WarmUntilDone report that logs each attempt: its
// success, or its failure and the retry.
func LogWarmUp(log *slog.Logger) func(int, WarmStats, time.Duration, time.Duration, error) {
	return func(attempt int, st WarmStats, took, wait time.Duration, err error) {
		if err != nil {
			log.Warn("database warm-up failed; retrying (the service serves, not ready)", "attempt", attempt,
				"retry_in", wait.String(), "err", err)
			return
		}
		log.Info("database connections warmed", "conns", st.Conns, "statements", st.Statements,
			"took", took.String(), "attempts", attempt)
	}
}

// placementSQL reads one partition's placement (a router's cache miss).
const placementSQL = `SELECT kind, partition_id::TEXT, home_region, version, updated_at FROM placements
		 WHERE kind = $1 AND partition_id = $2`

// PlacementStatements returns the statement of a router's placement cache
// miss, which a flash sale of a new hotel sends from every router at its
// start, to warm a router's pool with.
func PlacementStatements() []string { return []string{placementSQL} }

// WarmStatements returns what a booking service warms its pool with: the
// hold path's statements and the appointment hold path's, each once.
func WarmStatements() []string {
	var all []string
	for _, sql := range append(HoldStatements(), AppointmentHoldStatements()...) {
		if !slices.Contains(all, sql) {
			all = append(all, sql)
		}
	}
	return all
}

// AppointmentHoldStatements returns every statement an appointment hold
// may send. TestWarmCoversTheAppointmentHoldPath (internal/httpapi) fails
// when the hold path sends one not here.
func AppointmentHoldStatements() []string {
	return []string{
		fenceSQL, claimKeySQL, storeResponseSQL, storedKeyAnswerSQL, insertOutboxSQL,
		slotHintSQL, takeSlotSQL, lockClinicGuestSQL, countClinicGuestSQL, lockGuestDaysSQL, liveElsewhereSQL,
		insertAppointmentSQL, insertSlotAuditSQL, alternativesSQL, slotAlternativesSQL,
		windowDoctorSQL, takeFirstSQL, windowHomeSQL, windowOpenSQL,
	}
}
