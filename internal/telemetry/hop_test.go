package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

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
