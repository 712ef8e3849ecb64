package dbtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// TripRecorder is a pgx tracer (postgres.Options.Tracer) that records the
// statements sent to the database while Record runs, grouped by round trip
// (a batch is one trip), leaving out BEGIN/COMMIT/ROLLBACK sent alone (a
// pipelined transaction sends them inside its batches: there they count).
type TripRecorder struct {
	mu    sync.Mutex
	on    bool
	trips [][]string
}

func (r *TripRecorder) add(trip []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.trips = append(r.trips, trip)
	}
}

// TraceQueryStart records a statement sent alone.
func (r *TripRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !isTxControl(d.SQL) {
		r.add([]string{d.SQL})
	}
	return ctx
}

// TraceQueryEnd does nothing.
func (r *TripRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart records a batch's statements as one trip.
func (r *TripRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var trip []string
	for _, q := range d.Batch.QueuedQueries {
		trip = append(trip, q.SQL)
	}
	r.add(trip)
	return ctx
}

// TraceBatchQuery does nothing.
func (r *TripRecorder) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd does nothing.
func (r *TripRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Record runs f and returns the round trips sent meanwhile.
func (r *TripRecorder) Record(f func()) [][]string {
	r.mu.Lock()
	r.on, r.trips = true, nil
	r.mu.Unlock()
	f()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.trips
}

// Statements returns the distinct statements of trips, in the order first
// sent, without BEGIN, COMMIT and ROLLBACK.
func Statements(trips [][]string) []string {
	var sent []string
	for _, trip := range trips {
		for _, sql := range trip {
			if !isTxControl(sql) && !slices.Contains(sent, sql) {
				sent = append(sent, sql)
			}
		}
	}
	return sent
}

func isTxControl(sql string) bool {
	switch strings.ToLower(strings.Fields(sql + " x")[0]) {
	case "begin", "commit", "rollback":
		return true
	}
	return false
}

// Describe lists trips for a failure message: each trip's statements,
// their first line each.
func Describe(trips [][]string) string {
	var b strings.Builder
	for i, trip := range trips {
		for j, sql := range trip {
			lead := "   "
			if j == 0 {
				lead = fmt.Sprintf("%2d.", i+1)
			}
			fmt.Fprintf(&b, "%s %s\n", lead, strings.TrimSpace(strings.SplitN(strings.TrimSpace(sql), "\n", 2)[0]))
		}
	}
	return b.String()
}
