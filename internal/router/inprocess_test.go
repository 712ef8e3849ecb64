package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/router"
)

// echo answers with what it was sent — as its upstream saw the request — and
// with a few answers of its own choosing by path, so that the two layouts
// can be compared byte for byte.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/v1/hotels/created":
		w.Header().Set("Location", "/v1/hotels/x")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
	case "/v1/hotels/empty":
		w.WriteHeader(http.StatusNoContent)
		return
	case "/v1/hotels/sniffed":
		_, _ = io.WriteString(w, "<html><body>plain</body></html>")
		return
	case "/v1/hotels/late-header":
		w.WriteHeader(http.StatusAccepted)
		w.Header().Set("X-Too-Late", "1") // after the status: never sent
		_, _ = io.WriteString(w, "accepted")
		return
	}
	seen := map[string]any{
		"method": r.Method, "uri": r.RequestURI, "length": r.ContentLength, "body": string(body),
		"forwarded_proto": r.Header.Get("X-Forwarded-Proto"), "router": r.Header.Get("X-Berth-Router"),
		"custom": r.Header.Get("X-Custom"), "hop": r.Header.Get("Keep-Alive") + r.Header.Get("X-Hop"),
		"authorization": r.Header.Get("Authorization"), "idempotency_key": r.Header.Get("Idempotency-Key"),
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(seen)
}

// answer is what a client of the router sees of one response, less the
// headers each HTTP server stamps on its own (Date).
type answer struct {
	status int
	header http.Header
	body   string
}

func ask(t *testing.T, url, method, path, body string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	resp.Header.Del("Date")
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// A router that serves its own region in-process gives clients the same
// answers as one that goes over the network: same status, headers and body,
// and the upstream sees the same request (method, URI, length, body,
// end-to-end headers; hop-by-hop ones stripped; the router's own headers).
func TestInProcessAnswersAsTheNetworkDoes(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(echo))
	t.Cleanup(upstream.Close)
	// The in-process router names its booking service by the same URL; the
	// transport serves it without dialling.
	local, err := router.InProcess(http.HandlerFunc(echo), upstream.URL, router.NewTransport(), nil)
	if err != nil {
		t.Fatal(err)
	}
	viaNet := startRouter(t, upstream.URL, router.NewTransport())
	viaProc := startRouter(t, upstream.URL, local)
	hold := `{"guest_id":"g1","quantity":1}`
	cases := []struct {
		method, path, body string
		header             map[string]string
	}{
		{"POST", "/v1/hotels/6a1e2b4c-0000-4000-8000-000000000000/reservations?x=1&y=%20z", hold,
			map[string]string{"Authorization": "Bearer t", "Idempotency-Key": "k1", "X-Custom": "c", "Connection": "X-Hop", "X-Hop": "h", "Keep-Alive": "timeout=5"}},
		{"GET", "/v1/hotels/6a1e2b4c-0000-4000-8000-000000000000/availability?check_in=2030-01-01", "", nil},
		{"POST", "/v1/hotels/created", "{}", nil},
		{"DELETE", "/v1/hotels/empty", "", nil},
		{"GET", "/v1/hotels/sniffed", "", nil},
		{"POST", "/v1/hotels/late-header", "", nil},
		{"HEAD", "/v1/hotels/6a1e2b4c-0000-4000-8000-000000000000/availability", "", nil},
	}
	for _, c := range cases {
		want := ask(t, viaNet, c.method, c.path, c.body, c.header)
		got := ask(t, viaProc, c.method, c.path, c.body, c.header)
		if got.status != want.status || got.body != want.body {
			t.Errorf("%s %s: in-process %d %q, over the network %d %q", c.method, c.path, got.status, got.body, want.status, want.body)
		}
		for _, h := range []http.Header{got.header, want.header} {
			slices.Sort(h["Vary"])
		}
		if fmt.Sprint(got.header) != fmt.Sprint(want.header) {
			t.Errorf("%s %s: headers in-process %v, over the network %v", c.method, c.path, got.header, want.header)
		}
	}
}

// A panic that escapes the in-process handler is, to the router, a dropped
// connection: the client gets a 503 problem and the process lives on.
func TestInProcessPanicIsADroppedConnection(t *testing.T) {
	t.Parallel()
	for _, v := range []any{"boom", http.ErrAbortHandler} {
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(v) })
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		local, err := router.InProcess(h, "http://booking.invalid", router.NewTransport(), quiet)
		if err != nil {
			t.Fatal(err)
		}
		url := startRouter(t, "http://booking.invalid", local)
		a := ask(t, url, "POST", "/v1/hotels", "{}", nil)
		if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"unavailable"`) {
			t.Fatalf("panic %v: %d %s", v, a.status, a.body)
		}
	}
}

// The in-process path is a shorter wire, not a way around the booking
// service's checks: without a token, with a token for another partition,
// or with a guest's token on an operator's route, a router of the together
// layout answers what the booking service answers over the network.
func TestInProcessKeepsTheBookingChecks(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		p := startPlatform(t, platformOptions{layout: l})
		h := p.seedHotel("us-east", 3, bookingtest.Date(1), bookingtest.Date(3))
		other := p.seedHotel("us-east", 3, bookingtest.Date(1), bookingtest.Date(3))
		rt := p.routers["us-east"]
		path := "/v1/hotels/" + h.ID + "/reservations"
		body := holdBody("g1", h, bookingtest.Date(1), bookingtest.Date(2), 1)
		if r := rt.Do(bookingtest.Request{Method: "POST", Path: path, IdemKey: bookingtest.NewKey(), Body: body}); r.Status != http.StatusUnauthorized {
			t.Errorf("no token: %d %s", r.Status, r.Body)
		}
		staff := p.bookings["us-east"].Token("staff-1", berth.RoleStaff, other.ID)
		if r := rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/room-types", Token: staff,
			Body: map[string]any{"name": "Single", "max_guests": 1, "price_cents": 5000, "currency": "EUR", "overbooking_pct": 0}}); r.Status != http.StatusForbidden {
			t.Errorf("staff of another hotel: %d %s", r.Status, r.Body)
		}
		if r := rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/placements/hotel/" + h.ID + "/move", Token: p.guest("g1"),
			Body: map[string]any{"to_region": "eu-west"}}); r.Status != http.StatusForbidden {
			t.Errorf("a guest moving a hotel: %d %s", r.Status, r.Body)
		}
		if n := countReservations(t, p, h.ID); n != 0 {
			t.Fatalf("%d reservations after refused requests", n)
		}
	})
}

// The last room, raced from every region's entry point at once: in both
// layouts exactly one hold wins, every loser is a 409, and the database
// agrees — one live reservation, no night over its limit. Each router
// serves the hotel's home region in-process (us-east) or over the network.
func TestLastRoomRacedThroughEveryRouter(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		p := startPlatform(t, platformOptions{layout: l})
		for _, home := range []string{"us-east", "eu-west"} {
			h := p.seedHotel(home, 1, bookingtest.Date(1), bookingtest.Date(4))
			const perRegion = 16
			var (
				wg       sync.WaitGroup
				start    = make(chan struct{})
				mu       sync.Mutex
				byStatus = map[int]int{}
			)
			for _, via := range berth.Regions() {
				for i := range perRegion {
					guest := fmt.Sprintf("g-%s-%d", via, i)
					token := p.guest(guest)
					wg.Go(func() {
						<-start
						r, err := p.routers[via].Try(context.Background(), bookingtest.Request{Method: "POST",
							Path: "/v1/hotels/" + h.ID + "/reservations", Token: token, IdemKey: bookingtest.NewKey(),
							Body: holdBody(guest, h, bookingtest.Date(1), bookingtest.Date(3), 1)})
						status := -1
						if err == nil {
							status = r.Status
							if r.Status != http.StatusCreated && r.Code() != "sold_out" {
								t.Errorf("via %s: %d %s", via, r.Status, r.Body)
							}
						}
						mu.Lock()
						byStatus[status]++
						mu.Unlock()
					})
				}
			}
			close(start)
			wg.Wait()
			if byStatus[http.StatusCreated] != 1 || byStatus[http.StatusConflict] != 3*perRegion-1 {
				t.Fatalf("%s hotel: answers by status %v, want one 201 and %d 409", home, byStatus, 3*perRegion-1)
			}
			var live int
			if err := dbtest.SQL(p.db).QueryRow(context.Background(),
				`SELECT count(*) FROM reservations WHERE hotel_id = $1 AND status IN ('held', 'confirmed')`, h.ID).Scan(&live); err != nil {
				t.Fatal(err)
			}
			if live != 1 {
				t.Fatalf("%s hotel: %d live reservations, want 1", home, live)
			}
			if v, err := bookingtest.InventoryViolations(context.Background(), p.db); err != nil || len(v) > 0 {
				t.Fatalf("%s hotel: inventory violations %v %v", home, v, err)
			}
		}
	})
}

// A stale directory in a router of the together layout sends a write to its
// own, in-process booking service after the partition moved away: the fence
// refuses it inside the transaction (421, nothing written there), the
// router follows the move, and the one reservation is the new home's.
func TestStaleInProcessRouterNeverWritesForAnotherHome(t *testing.T) {
	t.Parallel()
	p := startPlatform(t, platformOptions{layout: together})
	ctx := context.Background()
	h := p.seedHotel("us-east", 5, bookingtest.Date(1), bookingtest.Date(3))
	if region, _, err := p.dirs["us-east"].Resolve(ctx, berth.KindHotel, h.ID); region != "us-east" || err != nil {
		t.Fatalf("resolve: %s %v", region, err)
	}
	// Move behind the us-east router's back (no event reaches its directory).
	if _, err := postgres.NewPlacements(p.db).MovePlacement(ctx, berth.KindHotel, h.ID, "ap-south"); err != nil {
		t.Fatal(err)
	}
	before := p.metric("us-east", "berth_router_misdirected_total")
	var wg sync.WaitGroup
	start := make(chan struct{})
	answers := make(chan bookingtest.Response, 8)
	for i := range 8 {
		guest := fmt.Sprintf("g%d", i)
		token := p.guest(guest)
		wg.Go(func() {
			<-start
			answers <- p.routers["us-east"].Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
				Token: token, IdemKey: bookingtest.NewKey(), Body: holdBody(guest, h, bookingtest.Date(1), bookingtest.Date(2), 1)})
		})
	}
	close(start)
	wg.Wait()
	close(answers)
	created := 0
	for r := range answers {
		if r.Status == http.StatusCreated && r.Header.Get("X-Berth-Served-By") == "ap-south" {
			created++
		} else if r.Status != http.StatusConflict {
			t.Errorf("hold through the stale router: %d served by %q %s", r.Status, r.Header.Get("X-Berth-Served-By"), r.Body)
		}
	}
	if created != 5 {
		t.Errorf("%d holds created, want 5 (the rooms)", created)
	}
	if got := p.metric("us-east", "berth_router_misdirected_total") - before; got < 1 {
		t.Errorf("the stale router followed %d 421s, want at least one", got)
	}
	var homes []string
	rows, err := dbtest.SQL(p.db).Query(ctx, `SELECT DISTINCT home_region FROM reservations WHERE hotel_id = $1`, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		homes = append(homes, s)
	}
	if rows.Err() != nil || !slices.Equal(homes, []string{"ap-south"}) {
		t.Fatalf("reservations written with homes %v (%v), want only ap-south", homes, rows.Err())
	}
	if v, err := bookingtest.InventoryViolations(ctx, p.db); err != nil || len(v) > 0 {
		t.Fatalf("inventory violations %v %v", v, err)
	}
}
