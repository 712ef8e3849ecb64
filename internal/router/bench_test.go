package router_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
)

// BenchmarkRouter measures what the router adds on loopback: the same reads
// and writes sent straight to the booking service and through the router,
// in one run. Run: go test -run '^$' -bench Router ./internal/router/
// It reports p50 and p99 latencies per request besides ns/op.
func BenchmarkRouter(b *testing.B) {
	p := startPlatform(b, platformOptions{})
	h := p.seedHotel("us-east", 100_000, bookingtest.Date(1), bookingtest.Date(3))
	guest := p.guest("bench-guest")
	if _, _, err := p.dirs["us-east"].Resolve(context.Background(), berth.KindHotel, h.ID); err != nil {
		b.Fatal(err)
	}
	read := func() bookingtest.Request {
		return bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + bookingtest.Date(1) + "&check_out=" + bookingtest.Date(3)}
	}
	write := func() bookingtest.Request {
		return bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: guest, IdemKey: bookingtest.NewKey(),
			Body: holdBody("bench-guest", h, bookingtest.Date(1), bookingtest.Date(2), 1)}
	}
	for _, bc := range []struct {
		name   string
		env    *bookingtest.Env
		req    func() bookingtest.Request
		status int
	}{
		{"read/direct", p.bookings["us-east"], read, http.StatusOK},
		{"read/via-router", p.routers["us-east"], read, http.StatusOK},
		{"write/direct", p.bookings["us-east"], write, http.StatusCreated},
		{"write/via-router", p.routers["us-east"], write, http.StatusCreated},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				req := bc.req()
				start := time.Now()
				r, err := bc.env.Try(ctx, req)
				lat = append(lat, time.Since(start))
				if err != nil || r.Status != bc.status {
					b.Fatalf("%v %d %s", err, r.Status, r.Body)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
