package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/telemetry"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A hold sent through the router stays in the client's trace on the way to
// the booking service, sampled (with the router's client span as the
// booking service's parent) or not (the context still travels), and the
// router's /metrics carries the RED series per route template next to its
// own counters — one layer of HTTP metrics per request, the server's.
func TestTelemetry(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(0), bookingtest.Date(60))
	// The booking service as the router sees it, remembering the trace
	// context each forwarded request carried.
	var (
		mu      sync.Mutex
		parents []string
	)
	target, _ := url.Parse(env.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	booking := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("traceparent"))
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	defer booking.Close()

	spans := tracetest.NewInMemoryExporter()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := serveConfig{Region: "us-east", Addr: "127.0.0.1:0", BookingURLs: map[string]string{"us-east": booking.URL},
		DatabaseURL: env.DBURL, DirectoryRefresh: time.Minute, MaxBodyBytes: 1 << 20, ShutdownTimeout: 10 * time.Second,
		LogFormat: "json", Telemetry: []telemetry.Option{telemetry.WithSyncSpanExporter(spans), telemetry.WithoutGlobals()}}
	ready := make(chan string, 1)
	exited := make(chan error, 1)
	go func() { exited <- run(ctx, cfg, io.Discard, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-exited:
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := <-exited; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	rtr := &bookingtest.Env{T: t, URL: "http://" + addr, Tokens: env.Tokens, Client: env.Client}

	traceID, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	r := rtr.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
		Token: env.Token("g1", berth.RoleGuest), IdemKey: bookingtest.NewKey(),
		Header: map[string]string{"traceparent": "00-" + traceID.String() + "-b7ad6b7169203331-01"},
		Body: map[string]any{"guest_id": "g1", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(30), "check_out": bookingtest.Date(32), "quantity": 1}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold through the router: %d %s", r.Status, r.Body)
	}
	mu.Lock()
	got := append([]string(nil), parents...)
	mu.Unlock()
	var forwarded string
	for _, p := range got {
		if strings.Contains(p, traceID.String()) {
			forwarded = p
		}
	}
	if forwarded == "" {
		t.Fatalf("the booking service saw traceparents %q, none in the client's trace", got)
	}
	if strings.Contains(forwarded, "b7ad6b7169203331") {
		t.Error("the router forwarded the client's span as parent instead of its own client span")
	}
	var server, client bool
	for i := 0; !(server && client); i++ {
		for _, sp := range spans.GetSpans() {
			if sp.SpanContext.TraceID() != traceID {
				continue
			}
			server = server || sp.SpanKind == trace.SpanKindServer && sp.Name == "POST /v1/hotels/{id}/reservations"
			client = client || sp.SpanKind == trace.SpanKindClient && strings.Contains(forwarded, sp.SpanContext.SpanID().String())
		}
		if i == 500 {
			t.Fatalf("router spans in the trace: server %v, client %v", server, client)
		}
		time.Sleep(10 * time.Millisecond)
	}

	m := rtr.Do(bookingtest.Request{Method: "GET", Path: "/metrics"})
	text := string(m.Body)
	for _, want := range []string{
		`http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="201",http_route="/v1/hotels/{id}/reservations",region="us-east"}`,
		`berth_router_requests_total{class="write",status="201"}`,
		`berth_router_directory_entries`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "http_client_request_duration_seconds") {
		t.Error("/metrics has client series: the hop is measured twice")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}

	// Not sampled (the default without an exporter): no span is recorded,
	// but the booking service still joins the client's trace.
	unsampled, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	r = rtr.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
		Token: env.Token("g2", berth.RoleGuest), IdemKey: bookingtest.NewKey(),
		Header: map[string]string{"traceparent": "00-" + unsampled.String() + "-00f067aa0ba902b7-00"},
		Body: map[string]any{"guest_id": "g2", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(30), "check_out": bookingtest.Date(32), "quantity": 1}})
	if r.Status != http.StatusCreated {
		t.Fatalf("unsampled hold through the router: %d %s", r.Status, r.Body)
	}
	mu.Lock()
	last := parents[len(parents)-1]
	mu.Unlock()
	if !strings.HasPrefix(last, "00-"+unsampled.String()+"-") || !strings.HasSuffix(last, "-00") || strings.Contains(last, "00f067aa0ba902b7") {
		t.Errorf("unsampled: the booking service saw traceparent %q, want the client's trace with the router's span as parent", last)
	}
}
