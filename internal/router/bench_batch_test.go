package router_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// BenchmarkHotVsSpreadViaRouter sends 3-night holds through a router, 16 at
// a time, to spread inventory (random stays of 20 hotels) and to one hot
// room type (every hold the same nights, ample rooms), with hot-partition
// batching on (the default) and off, in one run: the hot holds/s over the
// spread ones is what batching buys (docs/adr/0010-hold-batching.md).
// Run: go test -run '^$' -bench HotVsSpread -benchtime 3000x ./internal/router/
func BenchmarkHotVsSpreadViaRouter(b *testing.B) {
	p := startPlatform(b, platformOptions{})
	const hotels = 20
	spread := make([]bookingtest.Hotel, hotels)
	for i := range spread {
		spread[i] = p.seedHotel("us-east", 100_000, bookingtest.Date(1), bookingtest.Date(300))
	}
	hot := p.seedHotel("us-east", 100_000, bookingtest.Date(1), bookingtest.Date(10))
	home := p.bookings["us-east"]
	admin := home.Admin()
	rt := p.routers["us-east"]
	for _, bc := range []struct {
		name  string
		hot   bool
		batch int
	}{
		{"spread/batched", false, postgres.DefaultHoldBatch},
		{"hot/batched", true, postgres.DefaultHoldBatch},
		{"spread/unbatched", false, 0},
		{"hot/unbatched", true, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			home.Store.SetHoldBatch(bc.batch)
			defer home.Store.SetHoldBatch(postgres.DefaultHoldBatch)
			before := home.Store.HoldBatchStats().Batched
			var failures atomic.Int64
			var firstErr atomic.Value
			b.SetParallelism(8) // 16 requests in flight on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(rand.Uint64(), 3))
				for pb.Next() {
					h, d := hot, 5
					if !bc.hot {
						h, d = spread[r.IntN(hotels)], 2+r.IntN(290)
					}
					resp, err := rt.Try(context.Background(), bookingtest.Request{Method: "POST",
						Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: uuid.NewString(),
						Body: holdBody("bench-"+uuid.NewString(), h, bookingtest.Date(d), bookingtest.Date(d+3), 1)})
					if err != nil || resp.Status != http.StatusCreated {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, string(resp.Body))
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "holds/s")
			if n := failures.Load(); n > 0 {
				b.Fatalf("%d holds failed, first: %v", n, firstErr.Load())
			}
			b.ReportMetric(float64(home.Store.HoldBatchStats().Batched-before), "batched")
		})
	}
}
