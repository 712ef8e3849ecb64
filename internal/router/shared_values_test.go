package router_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/router"
)

// The router's constant header values (X-Forwarded-Proto, X-Berth-Router,
// X-Berth-Home-Region) are shared by every request: what one request's
// upstream or client writer adds to them never reaches the next request.
func TestSharedHeaderValuesStayPerRequest(t *testing.T) {
	t.Parallel()
	const hotelID = "6f1c2a8e-3b7d-4e0f-9a51-2c4d6e8f0a1b"
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	seen := make(chan http.Header, 2)
	booking := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		// An upstream that appends to what it was sent and to its answer.
		r.Header.Add("X-Forwarded-Proto", "tampered")
		r.Header.Add("X-Berth-Router", "tampered")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"r"}`)
	})
	const base = "http://127.0.0.1:1"
	upstream, err := router.InProcess(booking, base, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	dir := placement.NewDirectory(onePlacement{placement.Placement{Kind: berth.KindHotel, PartitionID: hotelID, HomeRegion: "us-east"}}, quiet)
	if err := dir.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(router.Config{Region: "us-east", Bookings: map[string]string{"us-east": base},
		Directory: dir, Logger: quiet, Transport: upstream})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r := httptest.NewRequest(http.MethodPost, "/v1/hotels/"+hotelID+"/reservations", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
		got := <-seen
		if !slices.Equal(got["X-Forwarded-Proto"], []string{"http"}) || !slices.Equal(got["X-Berth-Router"], []string{"us-east"}) {
			t.Fatalf("request %d reached the booking service with %v", i, got)
		}
		h := w.Result().Header
		if !slices.Equal(h["X-Berth-Router"], []string{"us-east"}) || !slices.Equal(h["X-Berth-Home-Region"], []string{"us-east"}) {
			t.Fatalf("request %d answered with %v", i, h)
		}
		// A client-side writer appending to the answer's values.
		w.Header().Add("X-Berth-Router", "tampered")
		w.Header().Add("X-Berth-Home-Region", "tampered")
	}
}
