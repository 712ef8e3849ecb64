package router_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/router"
)

// moveAhead is a router's upstream transport that, before a write of one
// hotel leaves, moves that hotel (for real, in the database) to a region
// other than the one the write is going to — as if a move always committed
// just ahead of the request. Every such attempt meets the booking service's
// fence and comes back 421. It also records the Idempotency-Key and body of
// every write attempt.
type moveAhead struct {
	next http.RoundTripper
	p    *platform
	path string // the writes to intercept

	remaining atomic.Int64 // moves still to make
	always    atomic.Bool  // move before every attempt, regardless
	moves     atomic.Int64

	mu       sync.Mutex
	attempts []string // Idempotency-Key of each attempt
}

func (m *moveAhead) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.URL.Path == m.path {
		m.mu.Lock()
		m.attempts = append(m.attempts, r.Header.Get("Idempotency-Key"))
		m.mu.Unlock()
		if m.always.Load() || m.remaining.Add(-1) >= 0 {
			target := m.p.regionOf(r.URL.Host)
			to := berth.Regions()[0]
			for _, region := range berth.Regions() {
				if region != target {
					to = region
					break
				}
			}
			hotel := m.path[len("/v1/hotels/") : len("/v1/hotels/")+36]
			if _, err := postgres.NewPlacements(m.p.db).MovePlacement(r.Context(), berth.KindHotel, hotel, to); err != nil {
				return nil, fmt.Errorf("move ahead: %w", err)
			}
			m.moves.Add(1)
		}
	}
	return m.next.RoundTrip(r)
}

func (m *moveAhead) keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.attempts...)
}

// startMoveAhead is a platform whose us-east router's writes to h are
// chased by moves.
func startMoveAhead(t *testing.T, l layout, configure func(*router.Config)) (*platform, *moveAhead, bookingtest.Hotel) {
	ma := &moveAhead{}
	p := startPlatform(t, platformOptions{layout: l, configure: configure, transport: func(region string, next http.RoundTripper) http.RoundTripper {
		if region == "us-east" {
			ma.next = next
			return ma
		}
		return next
	}})
	ma.p = p
	h := p.seedHotel("us-east", 10, bookingtest.Date(1), bookingtest.Date(4))
	ma.path = "/v1/hotels/" + h.ID + "/reservations"
	return p, ma, h
}

func countReservations(t *testing.T, p *platform, hotelID string) int {
	t.Helper()
	var n int
	if err := dbtest.SQL(p.db).QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE hotel_id = $1`, hotelID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A write whose partition moves again each time the router re-sends it is
// followed from home to home until it lands: the client sees one 201, every
// attempt carried the client's Idempotency-Key, and one reservation exists.
func TestFollowsMovesUntilTheWriteLands(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		p, ma, h := startMoveAhead(t, l, nil)
		const chased = 6
		ma.remaining.Store(chased)
		key := bookingtest.NewKey()
		r := p.routers["us-east"].Do(bookingtest.Request{Method: "POST", Path: ma.path, Token: p.guest("g1"), IdemKey: key,
			Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)})
		if r.Status != http.StatusCreated {
			t.Fatalf("a write chased by %d moves: %d %s", chased, r.Status, r.Body)
		}
		var home string
		if err := dbtest.SQL(p.db).QueryRow(context.Background(), `SELECT home_region FROM placements WHERE kind = 'hotel' AND partition_id = $1`, h.ID).Scan(&home); err != nil {
			t.Fatal(err)
		}
		if r.Header.Get("X-Berth-Served-By") != home || r.Header.Get("X-Berth-Home-Region") != home {
			t.Fatalf("served by %q (home header %q), the hotel is homed in %s", r.Header.Get("X-Berth-Served-By"), r.Header.Get("X-Berth-Home-Region"), home)
		}
		keys := ma.keys()
		if len(keys) != chased+1 {
			t.Fatalf("%d upstream attempts, want %d (one per move and the last)", len(keys), chased+1)
		}
		for i, k := range keys {
			if k != key {
				t.Fatalf("attempt %d carried Idempotency-Key %q, want %q", i, k, key)
			}
		}
		if got := p.metric("us-east", "berth_router_misdirected_total"); got != chased {
			t.Errorf("berth_router_misdirected_total = %d, want %d", got, chased)
		}
		if got := p.metric("us-east", "berth_router_misdirected_chains_total"); got != 1 {
			t.Errorf("berth_router_misdirected_chains_total = %d, want 1", got)
		}
		if n := countReservations(t, p, h.ID); n != 1 {
			t.Fatalf("%d reservations, want 1", n)
		}
	})
}

// A partition that never settles is followed only until FollowMovesFor:
// then the client gets 503 with Retry-After — not a 421 — nothing was
// written, and the same request with the same key succeeds once moves stop.
func TestGivesUpOnAPartitionThatNeverSettles(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		// The budget is generous so that, even on a loaded machine, several
		// moves fit in it: what is tested is that following stops, not how fast.
		p, ma, h := startMoveAhead(t, l, func(c *router.Config) { c.FollowMovesFor = 2 * time.Second })
		ma.always.Store(true)
		req := bookingtest.Request{Method: "POST", Path: ma.path, Token: p.guest("g1"), IdemKey: bookingtest.NewKey(),
			Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)}
		r := p.routers["us-east"].Do(req)
		if r.Status != http.StatusServiceUnavailable || r.Code() != "unavailable" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("a write whose partition never settles: %d %v %s", r.Status, r.Header, r.Body)
		}
		if ma.moves.Load() < 2 {
			t.Fatalf("only %d moves were followed before giving up", ma.moves.Load())
		}
		if got := p.metric("us-east", "berth_router_misdirected_gave_up_total"); got != 1 {
			t.Errorf("berth_router_misdirected_gave_up_total = %d, want 1", got)
		}
		if n := countReservations(t, p, h.ID); n != 0 {
			t.Fatalf("%d reservations after a 503, want 0", n)
		}
		ma.always.Store(false)
		if r := p.routers["us-east"].Do(req); r.Status != http.StatusCreated {
			t.Fatalf("the same request once the partition settled: %d %s", r.Status, r.Body)
		}
		if n := countReservations(t, p, h.ID); n != 1 {
			t.Fatalf("%d reservations, want 1", n)
		}
	})
}

// An unknown partition is one prompt 404 from the local region: no 421 to
// follow, no retry, no loop.
func TestUnknownPartitionIsOnePrompt404(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		p, ma, h := startMoveAhead(t, l, nil)
		unknown := "6a1e2b4c-0000-4000-8000-00000000abcd"
		ma.path = "/v1/hotels/" + unknown + "/reservations"
		ma.remaining.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := p.routers["us-east"].Try(ctx, bookingtest.Request{Method: "POST", Path: ma.path, Token: p.guest("g1"),
			IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)})
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("an unknown partition hung")
		}
		if err != nil || r.Status != http.StatusNotFound || r.Code() != "not_found" {
			t.Fatalf("unknown partition: %v %d %s", err, r.Status, r.Body)
		}
		if n := len(ma.keys()); n != 1 {
			t.Fatalf("%d upstream attempts for an unknown partition, want 1", n)
		}
		if got := p.metric("us-east", "berth_router_misdirected_total"); got != 0 {
			t.Errorf("berth_router_misdirected_total = %d, want 0", got)
		}
	})
}

// A region that is down answers its partitions' writes 503 with
// Retry-After; once its partitions are drained elsewhere (a move in the
// database, while the region is still down), the very next write goes to
// the new home — the router asks the database after a connection error
// instead of waiting for an event or its next reload — and the client's
// retry with the same key lands once.
func TestDrainedDeadRegionServesAgain(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		p := startPlatform(t, platformOptions{layout: l})
		h := p.seedHotel("eu-west", 5, bookingtest.Date(1), bookingtest.Date(3))
		dead := httptest.NewServer(http.NotFoundHandler())
		deadURL := dead.URL
		dead.Close()
		rt := newRouterWith(t, p, "us-east", map[string]string{"eu-west": deadURL})
		req := bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: p.guest("g1"),
			IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)}
		r := rt.Do(req)
		if r.Status != http.StatusServiceUnavailable || r.Code() != "unavailable" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("write to a down region: %d %v %s", r.Status, r.Header, r.Body)
		}
		if _, err := postgres.NewPlacements(p.db).MovePlacement(context.Background(), berth.KindHotel, h.ID, "ap-south"); err != nil {
			t.Fatal(err)
		}
		r = rt.Do(req)
		if r.Status != http.StatusCreated || r.Header.Get("X-Berth-Served-By") != "ap-south" {
			t.Fatalf("the client's retry after the drain: %d served by %q: %s", r.Status, r.Header.Get("X-Berth-Served-By"), r.Body)
		}
		if r := rt.Do(req); r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the same key again: %d replayed %q", r.Status, r.Header.Get("Idempotent-Replayed"))
		}
		if n := countReservations(t, p, h.ID); n != 1 {
			t.Fatalf("%d reservations, want 1", n)
		}
	})
}
