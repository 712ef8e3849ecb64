package router_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/clientip"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/router"
)

// A write through any of the three routers for a partition homed elsewhere
// succeeds and is committed by the home region: the answer says so
// (X-Berth-Served-By, X-Berth-Home-Region) and so does the row.
func TestWriteThroughAnyRouterCommitsAtHome(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		p := startPlatform(t, platformOptions{layout: l})
		ctx := context.Background()
		for _, home := range berth.Regions() {
			h := p.seedHotel(home, 10, bookingtest.Date(1), bookingtest.Date(4))
			for _, via := range berth.Regions() {
				r := p.routers[via].Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
					Token: p.guest("g-" + via), IdemKey: bookingtest.NewKey(), Body: holdBody("g-"+via, h, bookingtest.Date(1), bookingtest.Date(3), 1)})
				if r.Status != http.StatusCreated {
					t.Fatalf("hold via %s for %s hotel: %d %s", via, home, r.Status, r.Body)
				}
				if got := r.Header.Get("X-Berth-Served-By"); got != home {
					t.Errorf("via %s: served by %q, want home %s", via, got, home)
				}
				if got := r.Header.Get("X-Berth-Home-Region"); got != home {
					t.Errorf("via %s: X-Berth-Home-Region %q, want %s", via, got, home)
				}
				var rowHome string
				if err := dbtest.SQL(p.db).QueryRow(ctx, `SELECT home_region FROM reservations WHERE hotel_id = $1 AND reservation_id = $2`,
					h.ID, r.JSON()["reservation_id"]).Scan(&rowHome); err != nil {
					t.Fatal(err)
				}
				if rowHome != home {
					t.Errorf("via %s: row committed with home_region %s, want %s", via, rowHome, home)
				}
				// Reads are served by the router's own region.
				r = p.routers[via].Do(bookingtest.Request{Method: "GET",
					Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + bookingtest.Date(1) + "&check_out=" + bookingtest.Date(3)})
				if r.Status != http.StatusOK || r.Header.Get("X-Berth-Served-By") != via || r.Header.Get("X-Berth-Home-Region") != home {
					t.Errorf("read via %s: %d served by %q home %q", via, r.Status, r.Header.Get("X-Berth-Served-By"), r.Header.Get("X-Berth-Home-Region"))
				}
			}
		}
	})
}

// A write sent straight to the wrong region's booking service is refused.
func TestWriteToWrongBookingServiceIsMisdirected(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		p := startPlatform(t, platformOptions{layout: l})
		h := p.seedHotel("eu-west", 10, bookingtest.Date(1), bookingtest.Date(4))
		for _, wrong := range []string{"us-east", "ap-south"} {
			r := p.bookings[wrong].Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
				Token: p.guest("g1"), IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)})
			if r.Status != http.StatusMisdirectedRequest || r.Code() != "misdirected" || r.JSON()["home_region"] != "eu-west" {
				t.Fatalf("%s: %d %s", wrong, r.Status, r.Body)
			}
		}
		var n int
		if err := dbtest.SQL(p.db).QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE hotel_id = $1`, h.ID).Scan(&n); err != nil || n != 0 {
			t.Fatalf("reservations after refused writes: %d %v", n, err)
		}
	})
}

// A router whose directory is stale (the partition moved behind its back)
// gets a 421, refreshes the entry and re-sends once: the client sees 201.
func TestStaleDirectoryRecoversOn421(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		p := startPlatform(t, platformOptions{layout: l})
		h := p.seedHotel("us-east", 10, bookingtest.Date(1), bookingtest.Date(4))
		// The us-east router learns the home (a cache miss reads the database).
		if region, ok, err := p.dirs["us-east"].Resolve(context.Background(), berth.KindHotel, h.ID); region != "us-east" || !ok || err != nil {
			t.Fatalf("resolve: %s %v %v", region, ok, err)
		}
		// Move through the ap-south router (a move is served locally, unfenced).
		r := p.routers["ap-south"].Do(bookingtest.Request{Method: "POST", Path: "/v1/placements/hotel/" + h.ID + "/move",
			Token: p.ops(), Body: map[string]any{"to_region": "eu-west"}})
		if r.Status != http.StatusOK || r.Header.Get("X-Berth-Served-By") != "ap-south" {
			t.Fatalf("move: %d %s", r.Status, r.Body)
		}
		if region, _, _ := p.dirs["us-east"].Lookup(berth.KindHotel, h.ID); region != "us-east" {
			t.Fatalf("the us-east router's directory should still be stale, says %s", region)
		}
		r = p.routers["us-east"].Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
			Token: p.guest("g1"), IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)})
		if r.Status != http.StatusCreated || r.Header.Get("X-Berth-Served-By") != "eu-west" || r.Header.Get("X-Berth-Home-Region") != "eu-west" {
			t.Fatalf("write with a stale directory: %d served by %q: %s", r.Status, r.Header.Get("X-Berth-Served-By"), r.Body)
		}
		if region, v, _ := p.dirs["us-east"].Lookup(berth.KindHotel, h.ID); region != "eu-west" || v != 2 {
			t.Fatalf("directory after 421: %s v%d", region, v)
		}
		m := p.routers["us-east"].Do(bookingtest.Request{Method: "GET", Path: "/metrics"})
		if !strings.Contains(string(m.Body), "berth_router_misdirected_total 1") {
			t.Fatalf("metrics:\n%s", m.Body)
		}
	})
}

// The payment webhooks are routed by the partition they name (Berth's:
// data.partition_id; Stripe's: the intent's metadata), and their raw bytes
// and headers reach the home region untouched.
func TestWebhookGoesHomeWithRawBody(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		var got atomic.Value
		home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got.Store(r.Header.Get("Berth-Signature") + r.Header.Get("Stripe-Signature") + "|" + string(b))
			w.Header().Set("X-Berth-Served-By", "eu-west")
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(home.Close)
		p := startPlatform(t, platformOptions{layout: l})
		h := p.seedHotel("eu-west", 1, bookingtest.Date(1), bookingtest.Date(2))
		// Point eu-west at the recording server to see exactly what arrives.
		rt := newRouterWith(t, p, "us-east", map[string]string{"eu-west": home.URL})
		body := `{"id":"evt_1","type":"payment.succeeded",  "data":{"kind":"hotel","partition_id":"` + strings.ToUpper(h.ID) + `","reservation_id":"x","payment_ref":"p","amount_cents":1}}`
		r := rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/payments/webhook", Body: body, Header: map[string]string{"Berth-Signature": "t=1,v1=abc"}})
		if r.Status != http.StatusOK || r.Header.Get("X-Berth-Home-Region") != "eu-west" {
			t.Fatalf("webhook: %d %v", r.Status, r.Header)
		}
		if got.Load() != "t=1,v1=abc|"+body {
			t.Fatalf("upstream saw %q", got.Load())
		}
		// Stripe's own events name the partition in the intent's metadata.
		stripe := `{"id":"evt_2","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","metadata":{"berth_kind":"hotel","berth_partition_id":"` + h.ID + `"}}}}`
		r = rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/payments/stripe/webhook", Body: stripe, Header: map[string]string{"Stripe-Signature": "t=1,v1=def"}})
		if r.Status != http.StatusOK || r.Header.Get("X-Berth-Home-Region") != "eu-west" {
			t.Fatalf("stripe webhook: %d %v", r.Status, r.Header)
		}
		if got.Load() != "t=1,v1=def|"+stripe {
			t.Fatalf("upstream saw %q", got.Load())
		}
	})
}

// newRouterWith starts one more router for region with some booking URLs
// overridden.
func newRouterWith(t *testing.T, p *platform, region string, override map[string]string) *bookingtest.Env {
	t.Helper()
	urls := map[string]string{}
	for r, env := range p.bookings {
		urls[r] = env.URL
	}
	for r, u := range override {
		urls[r] = u
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := placement.NewDirectory(postgres.NewPlacements(p.db), quiet)
	if err := dir.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(router.Config{Region: region, Bookings: urls, Directory: dir, MaxBodyBytes: 4096, Logger: quiet,
		Transport: p.upstream(region, urls[region])})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	b := p.bookings[region]
	return &bookingtest.Env{T: t, URL: srv.URL, DB: p.db, Store: b.Store, Tokens: b.Tokens, Client: b.Client, Server: srv}
}

// A region that is down is a prompt 503 problem with Retry-After, for reads
// and writes alike; an oversized body is a 413 problem.
func TestDownRegionAndLimits(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		p := startPlatform(t, platformOptions{layout: l})
		h := p.seedHotel("eu-west", 1, bookingtest.Date(1), bookingtest.Date(2))
		dead := httptest.NewServer(http.NotFoundHandler())
		deadURL := dead.URL
		dead.Close() // nothing listens there any more: connection refused
		rt := newRouterWith(t, p, "us-east", map[string]string{"eu-west": deadURL})
		r := rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: p.guest("g1"),
			IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)})
		if r.Status != http.StatusServiceUnavailable || r.Code() != "unavailable" || r.Header.Get("Retry-After") == "" ||
			!strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
			t.Fatalf("write to a down region: %d %v %s", r.Status, r.Header, r.Body)
		}
		r = rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: p.guest("g1"),
			IdemKey: bookingtest.NewKey(), Body: strings.Repeat("x", 5000)})
		if r.Status != http.StatusRequestEntityTooLarge || r.Code() != "invalid_request" {
			t.Fatalf("large body: %d %s", r.Status, r.Body)
		}
		// Unknown partitions and partition-less routes go to the local service.
		r = rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/6a1e2b4c-0000-4000-8000-000000000000/reservations", Token: p.guest("g1"),
			IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)})
		if r.Status != http.StatusNotFound || r.Header.Get("X-Berth-Served-By") != "us-east" {
			t.Fatalf("unknown partition: %d %s", r.Status, r.Body)
		}
		r = rt.Do(bookingtest.Request{Method: "GET", Path: "/v1/guests/g1/reservations"})
		if r.Status != http.StatusServiceUnavailable || r.Code() != "unavailable" {
			t.Fatalf("read model not configured: %d %s", r.Status, r.Body)
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			if r := rt.Do(bookingtest.Request{Method: "GET", Path: path}); r.Status != http.StatusOK {
				t.Errorf("%s: %d %s", path, r.Status, r.Body)
			}
		}
	})
}

// flaky fails the first upstream attempt of each request it is told to, as
// a dropped connection would.
type flaky struct {
	next  http.RoundTripper
	fails atomic.Int32
}

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && f.fails.Add(-1) >= 0 {
		return nil, errors.New("connection reset by peer (injected)")
	}
	return f.next.RoundTrip(r)
}

// A forwarded write is retried after a connection error only when it
// carries an Idempotency-Key.
func TestRetryOnlyWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		fl := &flaky{}
		p := startPlatform(t, platformOptions{layout: l, transport: func(region string, next http.RoundTripper) http.RoundTripper {
			if region == "us-east" {
				fl.next = next
				return fl
			}
			return next
		}})
		h := p.seedHotel("eu-west", 5, bookingtest.Date(1), bookingtest.Date(2))
		fl.fails.Store(1)
		r := p.routers["us-east"].Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: p.guest("g1"),
			IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)})
		if r.Status != http.StatusCreated {
			t.Fatalf("keyed write after one dropped connection: %d %s", r.Status, r.Body)
		}
		fl.fails.Store(1)
		r = p.routers["us-east"].Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/room-types", Token: p.bookings["eu-west"].Admin(),
			Body: map[string]any{"name": "Single", "max_guests": 1, "price_cents": 5000, "currency": "EUR", "overbooking_pct": 0}})
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("unkeyed write after a dropped connection must not be retried: %d %s", r.Status, r.Body)
		}
	})
}

// /v1/guests/* goes to the read model.
func TestGuestsGoToReadModel(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		rm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"items":[],"next_cursor":null,"path":"`+r.URL.Path+`","q":"`+r.URL.RawQuery+`"}`)
		}))
		t.Cleanup(rm.Close)
		p := startPlatform(t, platformOptions{layout: l, readModel: rm.URL})
		r := p.routers["ap-south"].Do(bookingtest.Request{Method: "GET", Path: "/v1/guests/g1/reservations?kind=hotel"})
		if r.Status != http.StatusOK || r.JSON()["path"] != "/v1/guests/g1/reservations" || r.JSON()["q"] != "kind=hotel" {
			t.Fatalf("guests: %d %s", r.Status, r.Body)
		}
	})
}

// countWrites records what a router counts for placement by origin.
type countWrites struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countWrites) Stats() (uint64, uint64) { return 7, 1 }

func (c *countWrites) Count(kind berth.Kind, id string) {
	c.mu.Lock()
	c.n[string(kind)+"/"+id]++
	c.mu.Unlock()
}

// Client writes of known partitions are counted where they enter; reads,
// unknown partitions and partition-less requests are not.
func TestRouterCountsWritesByOrigin(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		counted := &countWrites{n: map[string]int{}}
		p := startPlatform(t, platformOptions{layout: l, configure: func(c *router.Config) {
			if c.Region == "eu-west" {
				c.Writes = counted
			}
		}})
		h := p.seedHotel("us-east", 5, bookingtest.Date(1), bookingtest.Date(3))
		rt := p.routers["eu-west"]
		for range 2 {
			if r := rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: p.guest("g1"),
				IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)}); r.Status != http.StatusCreated {
				t.Fatalf("hold: %d %s", r.Status, r.Body)
			}
		}
		rt.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + bookingtest.Date(1) + "&check_out=" + bookingtest.Date(2)})
		rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/6a1e2b4c-0000-4000-8000-000000000001/reservations", Token: p.guest("g1"),
			IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)})
		p.routers["us-east"].Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: p.guest("g1"),
			IdemKey: bookingtest.NewKey(), Body: holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)})
		if m := rt.Do(bookingtest.Request{Method: "GET", Path: "/metrics"}); !strings.Contains(string(m.Body), `berth_router_origin_flushes_total{result="failed"} 1`) {
			t.Errorf("metrics lack the tallies' flushes:\n%s", m.Body)
		}
		counted.mu.Lock()
		defer counted.mu.Unlock()
		if len(counted.n) != 1 || counted.n["hotel/"+h.ID] != 2 {
			t.Fatalf("counted %v, want 2 writes of hotel %s", counted.n, h.ID)
		}
	})
}

// A guest's partner grants (PUT, DELETE, GET …/partners) reach the read
// model through any router with their method and the guest's token.
func TestGuestGrantsGoToReadModel(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		rm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"method": r.Method, "path": r.URL.Path, "auth": r.Header.Get("Authorization")})
		}))
		t.Cleanup(rm.Close)
		p := startPlatform(t, platformOptions{layout: l, readModel: rm.URL})
		for _, region := range berth.Regions() {
			for _, m := range []string{"PUT", "DELETE", "GET"} {
				path := "/v1/guests/g1/partners/2f1b6f0e-8c55-4a8e-a0c1-1d2b3c4d5e6f"
				if m == "GET" {
					path = "/v1/guests/g1/partners"
				}
				r := p.routers[region].Do(bookingtest.Request{Method: m, Path: path, Token: "guest-token"})
				got := r.JSON()
				if r.Status != http.StatusOK || got["method"] != m || got["path"] != path || got["auth"] != "Bearer guest-token" {
					t.Fatalf("%s %s through %s: %d %s", m, path, region, r.Status, r.Body)
				}
			}
		}
	})
}

// X-Forwarded-For upstream: a client's own header is not passed on as if a
// proxy had vouched for it; behind a trusted proxy, the chain grows by the
// proxy's address.
func TestForwardedForUpstream(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		rm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"xff": strings.Join(r.Header.Values("X-Forwarded-For"), "|")})
		}))
		t.Cleanup(rm.Close)
		spoof := map[string]string{"X-Forwarded-For": "6.6.6.6"}
		untrusted := startPlatform(t, platformOptions{layout: l, readModel: rm.URL})
		r := untrusted.routers["us-east"].Do(bookingtest.Request{Method: "GET", Path: "/v1/guests/g1/reservations", Header: spoof})
		if r.JSON()["xff"] != "127.0.0.1" {
			t.Errorf("from an untrusted peer, upstream X-Forwarded-For = %q, want only the peer", r.JSON()["xff"])
		}
		loopback, err := clientip.Parse(clientip.EnvVar, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		trusted := startPlatform(t, platformOptions{layout: l, readModel: rm.URL, proxies: loopback})
		r = trusted.routers["us-east"].Do(bookingtest.Request{Method: "GET", Path: "/v1/guests/g1/reservations", Header: spoof})
		if r.JSON()["xff"] != "6.6.6.6, 127.0.0.1" {
			t.Errorf("from a trusted proxy, upstream X-Forwarded-For = %q, want its chain and the proxy", r.JSON()["xff"])
		}
	})
}
