package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/reservation"
)

// Cached availability through HTTP (JSON, Redis, X-Cache) against the same
// availability query issued straight to PostgreSQL, in one run:
//
//   - http-cached, sql: closed loop, as fast as they go (compare req/s);
//   - http-cached-2000rps, sql-2000rps: open loop paced at 2,000 requests/s,
//     latency measured from each request's scheduled start (no coordinated
//     omission); compare p99-ms.
//
// `make bench` runs it.
func BenchmarkCachedAvailability(b *testing.B) {
	env, cache, _ := startCached(b, rediscache.Options{Timeout: 50 * time.Millisecond}, bookingtest.Options{DB: postgres.Options{MaxConns: 16}})
	h := env.SeedHotel("", 1000, 0, bookingtest.Date(1), bookingtest.Date(60))
	in, out := bookingtest.Date(10), bookingtest.Date(13)
	path := "/v1/hotels/" + h.ID + "/availability?check_in=" + in + "&check_out=" + out
	ci, _ := reservation.ParseDate(in)
	co, _ := reservation.ParseDate(out)
	stay := reservation.Stay{CheckIn: ci, CheckOut: co}

	viaHTTP := func(ctx context.Context) error {
		r, err := env.Try(ctx, bookingtest.Request{Method: "GET", Path: path})
		if err == nil && r.Status != http.StatusOK {
			return errUnexpected
		}
		return err
	}
	viaSQL := func(ctx context.Context) error {
		_, err := env.Store.Availability(ctx, h.ID, stay, "")
		return err
	}
	if _, _, err := available(context.Background(), env, h, in, out); err != nil { // fill
		b.Fatal(err)
	}
	for _, p := range []struct {
		name string
		f    func(context.Context) error
	}{{"http-cached", viaHTTP}, {"sql", viaSQL}} {
		b.Run(p.name, func(b *testing.B) {
			var failures atomic.Int64
			start := time.Now()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := p.f(context.Background()); err != nil {
						failures.Add(1)
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			if n := failures.Load(); n > 0 {
				b.Fatalf("%d of %d requests failed", n, b.N)
			}
		})
	}
	for _, p := range []struct {
		name string
		f    func(context.Context) error
	}{{"http-cached-2000rps", viaHTTP}, {"sql-2000rps", viaSQL}} {
		b.Run(p.name, func(b *testing.B) {
			before := cache.Stats()
			paced(b, 2000, p.f)
			after := cache.Stats()
			if hits, misses := after.Hits-before.Hits, after.Misses-before.Misses; hits+misses > 0 {
				b.ReportMetric(float64(hits)/float64(hits+misses), "hit-ratio")
			}
		})
	}
	b.Logf("cache: %+v", cache.Stats())
}

var errUnexpected = &unexpected{}

type unexpected struct{}

func (*unexpected) Error() string { return "unexpected answer (not a 200)" }

// paced sends b.N requests at rate per second, each on its own goroutine
// (at most 512 in flight), and reports the latency percentiles measured
// from each request's scheduled start.
func paced(b *testing.B, rate int, f func(context.Context) error) {
	interval := time.Second / time.Duration(rate)
	lat := make([]time.Duration, b.N)
	var (
		wg       sync.WaitGroup
		failures atomic.Int64
		sem      = make(chan struct{}, 512)
	)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(context.Background()); err != nil {
				failures.Add(1)
			}
			lat[i] = time.Since(due)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed", n, b.N)
	}
}
