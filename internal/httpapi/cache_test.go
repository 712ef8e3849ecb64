package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/rediscache/redistest"
)

// startCached starts a booking server whose reads go through a regional
// cache on a real redis-server owned by the test.
func startCached(t testing.TB, copts rediscache.Options, opts bookingtest.Options) (*bookingtest.Env, *rediscache.Cache, *redistest.Server) {
	t.Helper()
	rs := redistest.Start(t)
	if copts.Region == "" {
		copts.Region = "us-east"
	}
	if copts.Timeout == 0 {
		copts.Timeout = time.Second // behaviour, not speed, under -race
	}
	copts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := rediscache.New(rs.URL(), copts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	configure := opts.Configure
	opts.Configure = func(cfg *httpapi.Config, s *postgres.Store) {
		if configure != nil {
			configure(cfg, s)
		}
		cfg.Cache = c
	}
	return bookingtest.Start(t, opts), c, rs
}

// available reads the availability of the hotel's room type over one night
// and returns it with the X-Cache header.
func available(ctx context.Context, env *bookingtest.Env, h bookingtest.Hotel, in, out string) (int, string, error) {
	r, err := env.Try(ctx, bookingtest.Request{Method: "GET",
		Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + in + "&check_out=" + out})
	if err != nil {
		return 0, "", err
	}
	if r.Status != http.StatusOK {
		return 0, "", fmt.Errorf("availability: %d %s", r.Status, r.Body)
	}
	rts, _ := r.JSON()["room_types"].([]any)
	if len(rts) != 1 {
		return 0, "", fmt.Errorf("availability: %s", r.Body)
	}
	n, _ := rts[0].(map[string]any)["available"].(float64)
	return int(n), r.Header.Get("X-Cache"), nil
}

func hold(t testing.TB, env *bookingtest.Env, h bookingtest.Hotel, in, out string) {
	t.Helper()
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: env.Admin(),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g1", "room_type_id": h.RoomTypeID,
			"check_in": in, "check_out": out, "quantity": 1}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
}

func TestCachedAvailabilityReflectsHold(t *testing.T) {
	t.Parallel()
	env, c, _ := startCached(t, rediscache.Options{}, bookingtest.Options{})
	h := env.SeedHotel("", 1000, 0, bookingtest.Date(1), bookingtest.Date(30))
	in, out := bookingtest.Date(3), bookingtest.Date(4)
	ctx := context.Background()
	want := func(n int, xcache string) {
		t.Helper()
		got, xc, err := available(ctx, env, h, in, out)
		if err != nil {
			t.Fatal(err)
		}
		if got != n || xc != xcache {
			t.Fatalf("available = %d (X-Cache %s), want %d (%s)", got, xc, n, xcache)
		}
	}
	want(1000, "miss")
	want(1000, "hit")
	hold(t, env, h, in, out)
	want(999, "miss") // the hold's commit invalidated the hotel
	want(999, "hit")
	// Another stay of the same hotel is another entry; a write to the hotel
	// drops them all.
	in2 := bookingtest.Date(10)
	if _, xc, _ := available(ctx, env, h, in2, bookingtest.Date(11)); xc != "miss" {
		t.Fatalf("other stay: X-Cache %s", xc)
	}
	hold(t, env, h, in2, bookingtest.Date(11))
	if n, xc, _ := available(ctx, env, h, in2, bookingtest.Date(11)); n != 999 || xc != "miss" {
		t.Fatalf("other stay after hold: %d %s", n, xc)
	}
	if s := c.Stats(); s.Hits < 2 || s.Invalidations < 2 {
		t.Fatalf("stats: %+v", s)
	}
	// Errors are not cached: an unknown hotel stays a 404 and is re-read.
	for range 2 {
		r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/00000000-0000-4000-8000-000000000001/availability?check_in=" + in + "&check_out=" + out})
		if r.Status != http.StatusNotFound || r.Header.Get("X-Cache") != "" {
			t.Fatalf("unknown hotel: %d X-Cache=%q", r.Status, r.Header.Get("X-Cache"))
		}
	}
}

// The staleness bound of a cached read: for many holds, the time from the
// hold's answer (its commit is before that) to the end of the first read
// that reflects it, while a reader polls the cached availability without
// pause. Logged, not asserted (timings belong in logs and benchmarks).
func TestCacheStalenessBound(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	// One guest makes every hold: lift the per-guest limits out of the way.
	env, _, _ := startCached(t, rediscache.Options{}, bookingtest.Options{GuestLimits: berth.GuestLimits{Holds: 1000, Quantity: 1000}})
	h := env.SeedHotel("", 10_000, 0, bookingtest.Date(1), bookingtest.Date(30))
	in, out := bookingtest.Date(5), bookingtest.Date(6)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type obs struct {
		n   int
		end time.Time
	}
	seen := make(chan obs, 1<<16)
	go func() {
		defer close(seen)
		for ctx.Err() == nil {
			n, _, err := available(ctx, env, h, in, out)
			if err != nil {
				continue
			}
			seen <- obs{n, time.Now()}
		}
	}()
	const trials = 200
	var lags []time.Duration
	last := 10_000
	for i := range trials {
		hold(t, env, h, in, out)
		committed := time.Now()
		want := last - 1
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case o := <-seen:
				if o.n <= want && !o.end.Before(committed) {
					lags = append(lags, o.end.Sub(committed))
					break wait
				}
			case <-deadline:
				t.Fatalf("trial %d: no read reflected the hold within 10s", i)
			}
		}
		last = want
	}
	cancel()
	slices.Sort(lags)
	p := func(q float64) time.Duration { return lags[min(len(lags)-1, int(q*float64(len(lags))))] }
	t.Logf("staleness after a hold (sync invalidation), %d trials: p50 %v, p99 %v, max %v",
		len(lags), p(0.50), p(0.99), lags[len(lags)-1])
}

// When invalidation is lost altogether (a write the cache never hears of),
// the TTL is the bound: measured with a 300 ms TTL.
func TestCacheStalenessWithoutInvalidationIsTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	const ttl = 300 * time.Millisecond
	env, _, _ := startCached(t, rediscache.Options{TTL: ttl}, bookingtest.Options{})
	h := env.SeedHotel("", 10_000, 0, bookingtest.Date(1), bookingtest.Date(30))
	in, out := bookingtest.Date(5), bookingtest.Date(6)
	ctx := context.Background()
	var lags []time.Duration
	for i := range 20 {
		if _, _, err := available(ctx, env, h, in, out); err != nil { // make sure it is cached
			t.Fatal(err)
		}
		// A write behind the service's back: no invalidation at all.
		if _, err := dbtest.SQL(env.DB).Exec(ctx, `UPDATE room_inventory SET reserved = reserved + 1
			WHERE hotel_id = $1 AND room_type_id = $2 AND night = $3`, h.ID, h.RoomTypeID, in); err != nil {
			t.Fatal(err)
		}
		committed := time.Now()
		want := 10_000 - i - 1
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, _, err := available(ctx, env, h, in, out)
			if err != nil {
				t.Fatal(err)
			}
			if n == want {
				lags = append(lags, time.Since(committed))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: stale beyond 10s with TTL %v", i, ttl)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	slices.Sort(lags)
	t.Logf("staleness with no invalidation, TTL %v, %d trials: p50 %v, max %v", ttl, len(lags), lags[len(lags)/2], lags[len(lags)-1])
}

// With Redis stopped, reads keep answering 200 from the database and the
// breaker opens; with Redis back, hits resume.
func TestCachedAvailabilitySurvivesRedisOutage(t *testing.T) {
	t.Parallel()
	env, c, rs := startCached(t, rediscache.Options{Timeout: 50 * time.Millisecond, FailureThreshold: 3, Cooldown: 200 * time.Millisecond},
		bookingtest.Options{})
	h := env.SeedHotel("", 100, 0, bookingtest.Date(1), bookingtest.Date(30))
	in, out := bookingtest.Date(3), bookingtest.Date(4)
	ctx := context.Background()
	for range 2 {
		if _, _, err := available(ctx, env, h, in, out); err != nil {
			t.Fatal(err)
		}
	}
	rs.Stop()
	hold(t, env, h, in, out) // a write during the outage still succeeds
	var slow time.Duration
	for i := range 100 {
		start := time.Now()
		n, xc, err := available(ctx, env, h, in, out)
		if err != nil {
			t.Fatalf("read %d with Redis down: %v", i, err)
		}
		slow = max(slow, time.Since(start))
		if n != 99 || xc != "miss" {
			t.Fatalf("read %d with Redis down: available %d, X-Cache %s", i, n, xc)
		}
	}
	s := c.Stats()
	if s.Breaker == rediscache.Closed || s.Bypassed == 0 {
		t.Fatalf("breaker did not open: %+v", s)
	}
	t.Logf("Redis down: 100 reads answered 200 from the database; %d Redis errors paid, %d bypassed; slowest read %v", s.Errors, s.Bypassed, slow)

	rs.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, xc, err := available(ctx, env, h, in, out)
		if err != nil {
			t.Fatal(err)
		}
		if xc == "hit" {
			if n != 99 {
				t.Fatalf("hit after recovery shows %d, want 99", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no hit within 10s of Redis coming back: %+v", c.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b := c.BreakerState(); b != rediscache.Closed {
		t.Fatalf("breaker %s after recovery", b)
	}
}

func rediscacheDefaults() rediscache.Options { return rediscache.Options{} }
