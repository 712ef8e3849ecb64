package router_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/router"
	"github.com/berthhq/berth/internal/telemetry"
)

// onePlacement is a placement source that knows one partition, at home in
// us-east: the directory of a benchmark that measures the router's own
// work, never its database.
type onePlacement struct{ p placement.Placement }

func (s onePlacement) ListPlacements(context.Context, berth.Kind, string) ([]placement.Placement, error) {
	return []placement.Placement{s.p}, nil
}

func (s onePlacement) GetPlacement(context.Context, berth.Kind, string) (placement.Placement, error) {
	return s.p, nil
}

// BenchmarkInProcessHop is what the router adds to a hold in the
// "together" layout (ADR 0022), per request, as the booking binary wires
// it: the proxy's telemetry middleware (an unsampled root span), the
// route and its placement, the upstream request built, the hop's trace
// context injected (telemetry.HopTransport) and the in-process transport
// serving the booking handler and reading its answer back. The booking
// handler answers a hold's 201 at once, so the figures are the router
// layer's CPU and allocations alone. It claims nothing about correctness:
// the in-process tests compare the layouts byte for byte.
func BenchmarkInProcessHop(b *testing.B) {
	const hotelID = "6f1c2a8e-3b7d-4e0f-9a51-2c4d6e8f0a1b"
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The binaries' propagator (telemetry.Setup sets it with its globals).
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	b.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	tel, shutdown, err := telemetry.Setup(context.Background(), "booking", "us-east", telemetry.WithoutGlobals())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = shutdown(context.Background()) })
	answer := []byte(`{"id":"0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f71","status":"held","hotel_id":"` + hotelID +
		`","quantity":1,"check_in":"2027-03-01","check_out":"2027-03-02"}`)
	booking := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", "/v1/hotels/"+hotelID+"/reservations/0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f71")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	})
	const base = "http://127.0.0.1:1"
	upstream, err := router.InProcess(booking, base, nil, quiet)
	if err != nil {
		b.Fatal(err)
	}
	dir := placement.NewDirectory(onePlacement{placement.Placement{Kind: berth.KindHotel, PartitionID: hotelID, HomeRegion: "us-east"}}, quiet)
	if err := dir.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	rt, err := router.New(router.Config{Region: "us-east", Bookings: map[string]string{"us-east": base},
		ReadModel: base, Directory: dir, Logger: quiet, Transport: tel.HopTransport(upstream)})
	if err != nil {
		b.Fatal(err)
	}
	handler := tel.ProxyMiddleware(func(r *http.Request) string { return "/v1/hotels/{id}/reservations" }, rt)
	body := `{"guest_id":"bench-guest","room_type_id":"0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70","check_in":"2027-03-01","check_out":"2027-03-02","quantity":1}`
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:2/v1/hotels/"+hotelID+"/reservations", strings.NewReader(body))
		r.RequestURI = r.URL.RequestURI()
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header.Set("Authorization", "Bearer abc.def.ghi")
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "bench-key-"+strconv.Itoa(i))
		w := &discardWriter{header: http.Header{}}
		handler.ServeHTTP(w, r)
		if w.status != http.StatusCreated {
			b.Fatalf("status %d", w.status)
		}
		i++
	}
}

// discardWriter is a ResponseWriter that keeps the status and drops the body.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
