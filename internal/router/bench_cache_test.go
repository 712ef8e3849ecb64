package router_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/rediscache/redistest"
	"github.com/berthhq/berth/internal/reservation"
)

// BenchmarkCachedAvailabilityViaRouter: availability through the router,
// served from the regional Redis cache, against the same query straight to
// PostgreSQL (the store's Availability), in one run; both closed loop with
// the same parallelism. Run: go test -run '^$' -bench CachedAvailabilityViaRouter ./internal/router/
func BenchmarkCachedAvailabilityViaRouter(b *testing.B) {
	rs := redistest.Start(b)
	c, err := rediscache.New(rs.URL(), rediscache.Options{Region: "us-east", TTL: time.Minute, Timeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	p := startPlatform(b, platformOptions{cache: c})
	h := p.seedHotel("us-east", 100, bookingtest.Date(1), bookingtest.Date(30))
	in, out := bookingtest.Date(5), bookingtest.Date(8)
	path := "/v1/hotels/" + h.ID + "/availability?check_in=" + in + "&check_out=" + out
	rt := p.routers["us-east"]
	stay := reservation.Stay{CheckIn: mustDate(b, in), CheckOut: mustDate(b, out)}
	var hits, total atomic.Int64
	b.Run("router-cached", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r, err := rt.Try(context.Background(), bookingtest.Request{Method: "GET", Path: path})
				if err != nil || r.Status != http.StatusOK {
					b.Errorf("%v %d", err, r.Status)
					return
				}
				total.Add(1)
				if r.Header.Get("X-Cache") == "hit" {
					hits.Add(1)
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		b.ReportMetric(float64(hits.Load())/float64(max(total.Load(), 1)), "hit-ratio")
	})
	b.Run("sql", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := p.bookings["us-east"].Store.Availability(context.Background(), h.ID, stay, ""); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})
}

func mustDate(b *testing.B, s string) reservation.Date {
	d, err := reservation.ParseDate(s)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
