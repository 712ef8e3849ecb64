package telemetry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// countingDialer counts the Write calls made on the connections it dials.
type countingDialer struct{ writes atomic.Int64 }

func (d *countingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, writes: &d.writes}, nil
}

type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// The proxy hop's transport: an unsampled request carries its trace on
// (same trace id, the caller's span as parent) in one write of headers and
// body, records no client span and no client metrics, and leaves the
// caller's request untouched; a sampled one gets its client span, the
// upstream's parent.
func TestHopTransport(t *testing.T) {
	tel, spans := setup(t)
	var (
		mu      sync.Mutex
		parents []string
		bodies  []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		parents = append(parents, r.Header.Get("traceparent"))
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	dialer := &countingDialer{}
	base := &http.Transport{DialContext: dialer.dial}
	defer base.CloseIdleConnections()
	hop := tel.HopTransport(base)

	send := func(ctx context.Context) *http.Request {
		t.Helper()
		body := `{"guest_id":"g1","quantity":1}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/hotels/h1/reservations", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := hop.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return req
	}

	traceID, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	spanID, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID}))
	const n = 5
	for range n {
		if req := send(unsampled); req.Header.Get("traceparent") != "" {
			t.Fatal("the transport wrote into the caller's request headers")
		}
	}
	if w := dialer.writes.Load(); w != n {
		t.Errorf("%d unsampled requests took %d writes, want one each", n, w)
	}
	mu.Lock()
	for i, p := range parents {
		if want := "00-" + traceID.String() + "-" + spanID.String() + "-00"; p != want {
			t.Errorf("request %d: upstream traceparent %q, want %q", i, p, want)
		}
		if bodies[i] != `{"guest_id":"g1","quantity":1}` {
			t.Errorf("request %d: upstream body %q", i, bodies[i])
		}
	}
	mu.Unlock()
	if got := spans.GetSpans(); len(got) != 0 {
		t.Errorf("%d spans recorded for unsampled requests", len(got))
	}

	ctx, parent := tel.Tracer().Start(context.Background(), "router")
	send(ctx)
	parent.End()
	var client *trace.SpanContext
	for _, sp := range spans.GetSpans() {
		if sp.SpanKind == trace.SpanKindClient {
			sc := sp.SpanContext
			client = &sc
		}
	}
	mu.Lock()
	last := parents[len(parents)-1]
	mu.Unlock()
	if client == nil || !strings.Contains(last, client.SpanID().String()) || client.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("sampled request: client span %v, upstream traceparent %q", client, last)
	}
	if text := scrape(t, tel); bytes.Contains([]byte(text), []byte("http_client_")) {
		t.Errorf("the hop recorded client metrics:\n%s", text)
	}
}

// The proxy's middleware without an exporter: an unsampled request is not
// recorded but continues the caller's trace with a span id of its own, a
// sampled one is recorded, a probe is neither; every measured request is
// one value of http.server.request.duration labelled by its route
// template, method (a client's own method as _OTHER), status and region.
func TestProxyMiddleware(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	tel, shutdown, err := telemetry.Setup(context.Background(), "router", "eu-west", telemetry.WithoutGlobals())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	var (
		sc        trace.SpanContext
		recording bool
		pattern   string
	)
	h := tel.ProxyMiddleware(func(r *http.Request) string { return "/v1/hotels/{id}" }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		span := trace.SpanFromContext(r.Context())
		sc, recording, pattern = span.SpanContext(), span.IsRecording(), r.Pattern
		if r.URL.Path == "/v1/hotels/h2" {
			w.WriteHeader(http.StatusConflict)
			return
		}
		_, _ = io.WriteString(w, "ok") // an implicit 200
	}))
	serve := func(method, path, traceparent string) {
		t.Helper()
		sc, recording, pattern = trace.SpanContext{}, false, ""
		req := httptest.NewRequest(method, path, nil)
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}

	serve("GET", "/v1/hotels/h1", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	if recording || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() == "00f067aa0ba902b7" || !sc.SpanID().IsValid() {
		t.Errorf("unsampled parent: recording %v, span %s/%s; want not recorded, the caller's trace, a span id of its own", recording, sc.TraceID(), sc.SpanID())
	}
	if pattern != "/v1/hotels/{id}" {
		t.Errorf("handler saw Pattern %q", pattern)
	}
	serve("POST", "/v1/hotels/h2", "")
	if recording || !sc.IsValid() {
		t.Errorf("root: recording %v, valid %v; want an unrecorded span with ids", recording, sc.IsValid())
	}
	serve("GET", "/v1/hotels/h3", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if !recording || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("sampled parent: recording %v, trace %s; want recorded in the caller's trace", recording, sc.TraceID())
	}
	serve("BREW", "/v1/hotels/h4", "")
	serve("GET", "/healthz", "")
	if sc.IsValid() {
		t.Error("a probe got a span")
	}

	text := scrape(t, tel)
	wantSeries(t, text, "http_server_request_duration_seconds_count",
		`http_route="/v1/hotels/{id}"`, `http_request_method="GET"`, `http_response_status_code="200"`, `region="eu-west"`)
	wantSeries(t, text, "http_server_request_duration_seconds_count",
		`http_request_method="POST"`, `http_response_status_code="409"`)
	wantSeries(t, text, "http_server_request_duration_seconds_count", `http_request_method="_OTHER"`)
	var total int
	for _, line := range series(text, "http_server_request_duration_seconds_count") {
		var n int
		if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%d", &n); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		total += n
		if strings.Contains(line, "healthz") {
			t.Errorf("a probe was measured: %s", line)
		}
	}
	if total != 4 {
		t.Errorf("%d requests measured, want 4 (each once):\n%s", total, text)
	}
	if strings.Contains(text, "http_server_request_body_size") || strings.Contains(text, "http_client_") {
		t.Errorf("series beyond the duration:\n%s", text)
	}
}
