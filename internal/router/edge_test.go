package router_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
)

// Hostile bytes stop at the router with the booking service's own check:
// a NUL in a guest id or a partition id is a 400 problem from the edge and
// never reaches the read model or a booking service (finding 5 of issue 13).
func TestHostileBytesStopAtTheRouter(t *testing.T) {
	t.Parallel()
	forLayouts(t, func(t *testing.T, l layout) {
		var hits atomic.Int32
		rm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"items":[],"next_cursor":null}`)
		}))
		t.Cleanup(rm.Close)
		p := startPlatform(t, platformOptions{layout: l, readModel: rm.URL})
		rt := p.routers["eu-west"]
		for _, path := range []string{
			"/v1/guests/%00/reservations",
			"/v1/guests/ali%FFce/reservations",
			"/v1/guests/alice/reservations?kind=%01",
			"/v1/hotels/%00/availability",
		} {
			r := rt.Do(bookingtest.Request{Method: "GET", Path: path})
			if r.Status != http.StatusBadRequest || r.Code() != "invalid_request" {
				t.Errorf("GET %s: %d %s, want 400 invalid_request", path, r.Status, r.Body)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("%d hostile request(s) reached the read model", n)
		}
		if r := rt.Do(bookingtest.Request{Method: "GET", Path: "/v1/guests/alice/reservations"}); r.Status != http.StatusOK || hits.Load() != 1 {
			t.Fatalf("a clean request: %d %s", r.Status, r.Body)
		}
	})
}
