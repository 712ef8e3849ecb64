package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/readmodel"
	"github.com/berthhq/berth/internal/view"
)

// TestEventFigures drains a backlog through three relays, then books at a
// steady rate with the read model running, and fails unless every event is
// relayed and projected. It logs the relay's throughput and the lag from
// commit to read-model visibility and asserts nothing about time. By default
// it is small (100 bookings/s for 2 s); the figures in docs/PERFORMANCE.md
// come from
//
//	BERTH_FIGURES_RATE=500 BERTH_FIGURES_SECONDS=10 go test -run TestEventFigures -v ./cmd/readmodel
func TestEventFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: skipped under -short")
	}
	rate := envInt("BERTH_FIGURES_RATE", 100)
	seconds := envInt("BERTH_FIGURES_SECONDS", 2)
	s := newStack(t)
	hotels := map[string][]bookingtest.Hotel{}
	for _, r := range berth.Regions() {
		for range 16 {
			hotels[r] = append(hotels[r], s.regions[r].SeedHotel(r, 1000, 0, bookingTestFrom, bookingTestTo))
		}
	}

	// 1. Relay throughput: a backlog written with the relays stopped, then
	// drained by the three relays.
	backlog := book(t, s, hotels, rate*4, 0)
	var unsent int
	_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent)
	start := time.Now()
	for _, r := range berth.Regions() {
		s.startRelay(r, nil)
	}
	eventually(t, 5*time.Minute, "backlog relayed", func() bool {
		var n int
		_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&n)
		return n == 0
	})
	elapsed := time.Since(start)
	t.Logf("relay throughput: %d events (from %d bookings) in %s = %.0f events/s (3 relays, batch 500)",
		unsent, backlog, elapsed.Round(time.Millisecond), float64(unsent)/elapsed.Seconds())

	// 2. Commit → visibility lag at a steady rate, read model running.
	var (
		mu   sync.Mutex
		lags []time.Duration
	)
	drainStart := time.Now()
	s.startReadModel(func(c *serveConfig) {
		c.Workers = envInt("BERTH_FIGURES_WORKERS", 32)
		c.Projector = func(st *postgres.ReadModel, log *slog.Logger) *readmodel.Projector {
			p := readmodel.NewProjector(st, log)
			p.OnApplied = func(it view.Item, applied time.Time) {
				mu.Lock()
				lags = append(lags, applied.Sub(it.EventTime))
				mu.Unlock()
			}
			return p
		}
	})
	eventually(t, 5*time.Minute, "backlog projected", func() bool {
		var n int
		_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FROM rm_processed_events WHERE consumer = 'readmodel'`).Scan(&n)
		return n >= unsent
	})
	drained := time.Since(drainStart)
	t.Logf("projection throughput: the backlog's %d events projected in %s from the read model's start = %.0f events/s",
		unsent, drained.Round(time.Millisecond), float64(unsent)/drained.Seconds())
	mu.Lock()
	lags = lags[:0]
	mu.Unlock()
	made := book(t, s, hotels, rate*seconds, rate)
	var total int
	_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&total)
	eventually(t, 5*time.Minute, "steady load projected", func() bool {
		var n int
		_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FROM rm_processed_events WHERE consumer = 'readmodel'`).Scan(&n)
		return n >= total
	})
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lags)
	pct := func(p float64) time.Duration { return lags[int(p*float64(len(lags)-1))] }
	t.Logf("end-to-end lag commit → read model at %d bookings/s for %ds (%d bookings, %d events): p50 %s, p99 %s, max %s",
		rate, seconds, made, len(lags), pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
}

// book makes n holds spread over the regions' hotels, paced at rate per
// second (0: as fast as possible), and returns how many it made. Each hold
// has a guest of its own: the per-guest hold limit (5 live holds in a hotel
// by default) refused the figures' rates when 26 guests made them all.
func book(t *testing.T, s *stack, hotels map[string][]bookingtest.Hotel, n, rate int) int {
	t.Helper()
	var (
		made atomic.Int64
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range 48 {
		wg.Go(func() {
			for i := range next {
				r := berth.Regions()[i%3]
				hs := hotels[r]
				hold(t, s.regions[r], hs[(i/3)%len(hs)], fmt.Sprintf("fig-guest-%d", i), 1+(i/12)%50)
				made.Add(1)
			}
		})
	}
	start := time.Now()
	for i := range n {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
				time.Sleep(d)
			}
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if rate > 0 {
		t.Logf("booking rate achieved: %.0f/s", float64(n)/time.Since(start).Seconds())
	}
	return int(made.Load())
}

func envInt(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	for _, c := range v {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
	}
	return n
}
