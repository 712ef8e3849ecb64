package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/loadtest/internal/report"
)

// DefaultSettle is how long a rush (flash-sale, clinic-opening) waits, once
// its setup has been relayed, before it opens (--settle).
const DefaultSettle = time.Second

// settlePoll and settleStall pace openAfterSetup's wait for the relay: the
// outbox is read every settlePoll, and a count of unsent setup events that
// has not fallen for settleStall means no relay is draining it (a platform
// without one, the in-process test server): the rush opens anyway.
var (
	settlePoll  = 50 * time.Millisecond
	settleStall = 3 * time.Second
)

// CheckSettle refuses a negative --settle.
func CheckSettle(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--settle %s: want 0 or more", d)
	}
	return nil
}

// openAfterSetup waits, before a rush opens, until the events of its setup
// — the hotel or clinic the scenario has just created, its room types,
// inventory, doctors and slots, on partitions — have left the outbox, that
// is been published for every region, and then grace more for the regions'
// consumers (search index, cache, waitlists, read model) to apply them.
//
// A real flash sale or 07:00 opening sells inventory set up well before it
// opens. A rush opened the moment its setup returns shares its first tens of
// milliseconds with that setup's relaying, indexing and projection in every
// region, which is the scenario's doing, not the sale's
// (docs/PERFORMANCE.md, "A rush opened on its own setup"). grace 0 opens at
// once, as the scenarios did before, and waits for nothing.
//
// The wait is bounded: at most a minute for the relay, and not at all once
// the count has stopped falling for settleStall (no relay is draining it);
// without a database only grace is waited. What it waited is in the
// report's figures (setup_relayed_ms, settle_ms) and, when the relay never
// drained the setup, in its notes.
func (e *Env) openAfterSetup(ctx context.Context, r *report.Report, prefix string, grace time.Duration, partitions ...string) error {
	if grace <= 0 {
		return nil
	}
	start := time.Now()
	if e.DB != nil {
		unsent, drained, err := e.awaitRelayed(ctx, partitions)
		if err != nil {
			return fmt.Errorf("wait for the setup's events: %w", err)
		}
		r.Figures[prefix+"setup_relayed_ms"] = float64(time.Since(start).Microseconds()) / 1000
		if !drained {
			r.Notes = append(r.Notes, fmt.Sprintf("%d event(s) of the setup were still unsent when the rush opened: no relay drained them", unsent))
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(grace):
	}
	r.Figures[prefix+"settle_ms"] = float64(time.Since(start).Microseconds()) / 1000
	return nil
}

// awaitRelayed polls the outbox until no event of partitions (none given:
// of any partition) is unsent (drained), the count has stopped falling for
// settleStall, or a minute has passed; unsent is the last count read.
func (e *Env) awaitRelayed(ctx context.Context, partitions []string) (unsent int64, drained bool, err error) {
	deadline := time.Now().Add(time.Minute)
	least, moved := int64(-1), time.Now()
	for {
		if unsent, err = e.unsentEvents(ctx, partitions...); err != nil {
			return 0, false, err
		}
		switch {
		case unsent == 0:
			return 0, true, nil
		case least < 0 || unsent < least:
			least, moved = unsent, time.Now()
		case time.Since(moved) >= settleStall || time.Now().After(deadline):
			return unsent, false, nil
		}
		select {
		case <-ctx.Done():
			return unsent, false, ctx.Err()
		case <-time.After(settlePoll):
		}
	}
}

// unsentEvents counts the outbox's unsent events of partitions (none given:
// of every partition).
func (e *Env) unsentEvents(ctx context.Context, partitions ...string) (n int64, err error) {
	if len(partitions) == 0 {
		err = e.DB.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&n)
	} else {
		err = e.DB.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE partition_id = ANY($1::TEXT[]::UUID[]) AND sent_at IS NULL`,
			partitions).Scan(&n)
	}
	return n, err
}
