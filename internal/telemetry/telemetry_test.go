package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/telemetry"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func setup(t *testing.T) (*telemetry.Telemetry, *tracetest.InMemoryExporter) {
	t.Helper()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "") // never export from a test
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	spans := tracetest.NewInMemoryExporter()
	tel, shutdown, err := telemetry.Setup(context.Background(), "test", "eu-west",
		telemetry.WithSyncSpanExporter(spans), telemetry.WithoutGlobals())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	if tel.Exporting() {
		t.Fatal("OTLP export is on without OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	return tel, spans
}

func scrape(t *testing.T, tel *telemetry.Telemetry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

// series returns the lines of a scrape that start with name (and a label set
// or a space), comments excluded.
func series(text, name string) []string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

func wantSeries(t *testing.T, text, name string, labels ...string) {
	t.Helper()
	for _, line := range series(text, name) {
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			return
		}
	}
	t.Errorf("no series %s with %v in:\n%s", name, labels, strings.Join(series(text, name), "\n"))
}

func TestNamedMetrics(t *testing.T) {
	tel, _ := setup(t)
	ctx := context.Background()
	tel.BookingOutcome(ctx, "hotel.hold", "sold_out")
	tel.TxRetry(ctx, &pgconn.PgError{Code: "40001"})
	tel.TxRetry(ctx, errors.New("boom"))
	tel.ConsumerLag(ctx, "readmodel", 42)
	tel.CacheResult(ctx, "availability", "hit")
	tel.CacheResult(ctx, "availability", "miss")
	tel.WaitingRoomDepth(ctx, "clinic-opening", 7)
	if err := tel.ObservePool(func() telemetry.PoolStats {
		return telemetry.PoolStats{Acquired: 3, Idle: 1, Total: 4, Max: 8, EmptyAcquire: 5, Acquires: 40, AcquireWait: 1500 * time.Millisecond}
	}); err != nil {
		t.Fatal(err)
	}
	var queries atomic.Int32
	if err := tel.ObserveOutbox(time.Hour, func(context.Context) (telemetry.OutboxStats, error) {
		queries.Add(1)
		return telemetry.OutboxStats{Backlog: 12, OldestAge: 90 * time.Second}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := tel.ObserveCache(func() telemetry.CacheStats {
		return telemetry.CacheStats{Invalidations: 10, EventInvalidations: 7, InvalidateErrors: 2,
			BumpRounds: 6, EventRounds: 1, BumpKeys: 9}
	}); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, tel)
	wantSeries(t, text, "berth_cache_invalidations_total", `source="write"`, `region="eu-west"`, "} 3")
	wantSeries(t, text, "berth_cache_invalidations_total", `source="event"`, "} 7")
	wantSeries(t, text, "berth_cache_invalidation_errors_total", "} 2")
	wantSeries(t, text, "berth_cache_bump_rounds_total", `trigger="write"`, "} 5")
	wantSeries(t, text, "berth_cache_bump_rounds_total", `trigger="event"`, "} 1")
	wantSeries(t, text, "berth_cache_bump_keys_total", "} 9")
	wantSeries(t, text, "berth_booking_outcomes_total", `op="hotel.hold"`, `code="sold_out"`, `region="eu-west"`)
	wantSeries(t, text, "berth_tx_retries_total", `reason="40001"`, `region="eu-west"`)
	wantSeries(t, text, "berth_tx_retries_total", `reason="other"`)
	wantSeries(t, text, "berth_consumer_lag", `consumer="readmodel"`, "} 42")
	wantSeries(t, text, "berth_cache_requests_total", `cache="availability"`, `result="hit"`)
	wantSeries(t, text, "berth_waiting_room_depth", `room="clinic-opening"`, "} 7")
	wantSeries(t, text, "berth_db_pool_acquired_conns", `region="eu-west"`, "} 3")
	wantSeries(t, text, "berth_db_pool_idle_conns", "} 1")
	wantSeries(t, text, "berth_db_pool_total_conns", "} 4")
	wantSeries(t, text, "berth_db_pool_max_conns", "} 8")
	wantSeries(t, text, "berth_db_pool_empty_acquire_total", "} 5")
	wantSeries(t, text, "berth_db_pool_acquires_total", "} 40")
	wantSeries(t, text, "berth_db_pool_acquire_wait_seconds_total", "} 1.5")
	wantSeries(t, text, "berth_outbox_backlog", `region="eu-west"`, "} 12")
	wantSeries(t, text, "berth_outbox_oldest_age_seconds", "} 90")
	wantSeries(t, text, "go_goroutines")
	scrape(t, tel)
	if n := queries.Load(); n != 1 {
		t.Errorf("outbox query ran %d times for two scrapes within its ttl; want 1 (cached)", n)
	}
}

// A failing outbox query publishes no series rather than a false zero.
func TestOutboxQueryFailure(t *testing.T) {
	tel, _ := setup(t)
	if err := tel.ObserveOutbox(time.Hour, func(context.Context) (telemetry.OutboxStats, error) {
		return telemetry.OutboxStats{}, errors.New("db down")
	}); err != nil {
		t.Fatal(err)
	}
	if s := series(scrape(t, tel), "berth_outbox_backlog"); len(s) > 0 {
		t.Fatalf("series after a failed query: %v", s)
	}
}

// One request through the client transport into the server middleware is
// one trace: the server span is the child of the client span, and the RED
// histogram is labelled by the route pattern, not the path.
func TestHTTPPropagationAndRED(t *testing.T) {
	tel, spans := setup(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !trace.SpanContextFromContext(r.Context()).IsValid() {
			t.Error("handler context has no span")
		}
		w.WriteHeader(http.StatusTeapot)
	})
	srv := httptest.NewServer(tel.Middleware(mux))
	defer srv.Close()
	client := &http.Client{Transport: tel.Transport(nil)}
	ctx, parent := tel.Tracer().Start(context.Background(), "caller")
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/things/abc", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	parent.End()

	var server, clientSpan *tracetest.SpanStub
	got := spans.GetSpans()
	for i := range got {
		switch got[i].SpanKind {
		case trace.SpanKindServer:
			server = &got[i]
		case trace.SpanKindClient:
			clientSpan = &got[i]
		}
	}
	if server == nil || clientSpan == nil {
		t.Fatalf("want a server and a client span, got %d spans", len(got))
	}
	if server.SpanContext.TraceID() != parent.SpanContext().TraceID() || clientSpan.SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Error("spans are not in the caller's trace")
	}
	if server.Parent.SpanID() != clientSpan.SpanContext.SpanID() {
		t.Error("server span is not the child of the client span")
	}
	if server.Name != "GET /v1/things/{id}" {
		t.Errorf("server span name %q, want the route pattern", server.Name)
	}
	text := scrape(t, tel)
	wantSeries(t, text, "http_server_request_duration_seconds_count",
		`http_route="/v1/things/{id}"`, `http_request_method="GET"`, `http_response_status_code="418"`, `region="eu-west"`)
	for _, line := range series(text, "http_server_request_duration_seconds_count") {
		if strings.Contains(line, "server_address") || strings.Contains(line, "abc") {
			t.Errorf("unbounded label in %s", line)
		}
	}
	wantSeries(t, text, "http_client_request_duration_seconds_count", `http_response_status_code="418"`)
}

func TestOutcomes(t *testing.T) {
	tel, _ := setup(t)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/hotels/{hotel_id}/reservations", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("full") != "" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"type":"https://berth.dev/problems/sold_out","status":409,"code":"sold_out"}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /v1/other", func(http.ResponseWriter, *http.Request) {})
	h := tel.Outcomes(map[string]string{"POST /v1/hotels/{hotel_id}/reservations": "hotel.hold"}, mux)
	for _, target := range []string{"/v1/hotels/h1/reservations", "/v1/hotels/h2/reservations?full=1", "/v1/hotels/h3/reservations?full=1"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", target, nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/other", nil))
	text := scrape(t, tel)
	wantSeries(t, text, "berth_booking_outcomes_total", `op="hotel.hold"`, `code="ok"`, "} 1")
	wantSeries(t, text, "berth_booking_outcomes_total", `op="hotel.hold"`, `code="sold_out"`, "} 2")
	if n := len(series(text, "berth_booking_outcomes_total")); n != 2 {
		t.Errorf("%d outcome series, want 2 (unmapped routes are not counted)", n)
	}
}

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	tel, _ := setup(t)
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("service", "test")
	ctx, span := tel.Tracer().Start(context.Background(), "op")
	log.InfoContext(ctx, "inside")
	span.End()
	log.Info("outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var in, out map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &out); err != nil {
		t.Fatal(err)
	}
	if in["trace_id"] != span.SpanContext().TraceID().String() || in["span_id"] != span.SpanContext().SpanID().String() {
		t.Errorf("record in a span: %v", in)
	}
	if in["service"] != "test" {
		t.Errorf("With attrs lost: %v", in)
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("record without a span has a trace id: %v", out)
	}
}

// Trace context survives a trip through NATS headers, whatever case the
// headers were written in.
func TestNATSHeaders(t *testing.T) {
	tel, _ := setup(t)
	ctx, span := tel.Tracer().Start(context.Background(), "publish")
	defer span.End()
	msg := nats.NewMsg("berth.events")
	msg.Header.Set("Ce-Id", "x")
	telemetry.InjectHeaders(ctx, msg.Header)
	if msg.Header.Get("traceparent") == "" {
		t.Fatalf("no traceparent in %v", msg.Header)
	}
	got := trace.SpanContextFromContext(telemetry.ExtractHeaders(context.Background(), msg.Header))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsRemote() {
		t.Errorf("extracted %v, want remote %v", got, span.SpanContext())
	}
	upper := nats.Header{"Traceparent": msg.Header["traceparent"]}
	if got := trace.SpanContextFromContext(telemetry.ExtractHeaders(context.Background(), upper)); got.TraceID() != span.SpanContext().TraceID() {
		t.Error("canonical-case header not found")
	}
	if got := trace.SpanContextFromContext(telemetry.ExtractHeaders(context.Background(), nil)); got.IsValid() {
		t.Error("span context from no headers")
	}
}

// A handler's own Prometheus text is served next to the OTel families.
func TestTextGatherer(t *testing.T) {
	tel, _ := setup(t)
	legacy := func(w io.Writer) {
		_, _ = io.WriteString(w, "# HELP berth_router_requests_total Requests.\n# TYPE berth_router_requests_total counter\nberth_router_requests_total{class=\"write\",status=\"201\"} 3\n")
	}
	tel.BookingOutcome(context.Background(), "hotel.hold", "ok")
	rec := httptest.NewRecorder()
	tel.MetricsHandler(telemetry.TextGatherer(legacy)).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	wantSeries(t, text, "berth_router_requests_total", `class="write"`, "} 3")
	wantSeries(t, text, "berth_booking_outcomes_total", `code="ok"`)
}

func TestPathTemplate(t *testing.T) {
	t.Parallel()
	words := map[string]bool{"v1": true, "hotels": true, "reservations": true, "confirm": true}
	for path, want := range map[string]string{
		"/v1/hotels/0b9e/reservations/77/confirm": "/v1/hotels/{id}/reservations/{id}/confirm",
		"/v1/hotels":         "/v1/hotels",
		"/":                  "/",
		"/wp-admin/x.php":    "/{id}/{id}",
		"/a/b/c/d/e/f/g/h/i": "/…",
	} {
		if got := telemetry.PathTemplate(path, words); got != want {
			t.Errorf("PathTemplate(%q) = %q, want %q", path, got, want)
		}
	}
}

// A handler that routes by path gets spans and RED series per template.
func TestRouted(t *testing.T) {
	tel, spans := setup(t)
	h := tel.Middleware(telemetry.Routed(func(r *http.Request) string {
		return telemetry.PathTemplate(r.URL.Path, map[string]bool{"v1": true, "hotels": true})
	}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/hotels/abc", nil))
	wantSeries(t, scrape(t, tel), "http_server_request_duration_seconds_count", `http_route="/v1/hotels/{id}"`, `http_response_status_code="202"`)
	if got := spans.GetSpans(); len(got) != 1 || got[0].Name != "GET /v1/hotels/{id}" {
		t.Errorf("spans: %v", got)
	}
}

func TestCheckEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.1")
	if errs := telemetry.CheckEnv(); len(errs) != 0 {
		t.Fatalf("valid settings rejected: %v", errs)
	}
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "10%")
	t.Setenv("OTEL_SDK_DISABLED", "yes")
	errs := strings.Join(telemetry.CheckEnv(), "\n")
	for _, want := range []string{"OTEL_TRACES_SAMPLER_ARG", "OTEL_SDK_DISABLED"} {
		if !strings.Contains(errs, want) {
			t.Errorf("%s not named in:\n%s", want, errs)
		}
	}
}

// Without an exporter nothing records spans nobody reads: a request's span
// is not sampled but still has ids (for the logs and the next hop), while a
// trace sampled upstream stays sampled (an exporting service downstream
// keeps its spans). OTEL_TRACES_SAMPLER, when set, decides instead.
func TestNoExporterSamplesNothingOfItsOwn(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	// start serves one request and returns its span's context and whether
	// the span recorded (asked while it is open: an ended span records
	// nothing either way).
	start := func(t *testing.T, header string) (trace.SpanContext, bool) {
		t.Helper()
		tel, shutdown, err := telemetry.Setup(context.Background(), "test", "eu-west", telemetry.WithoutGlobals())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = shutdown(context.Background()) })
		var (
			sc        trace.SpanContext
			recording bool
		)
		h := tel.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			span := trace.SpanFromContext(r.Context())
			sc, recording = span.SpanContext(), span.IsRecording()
		}))
		req := httptest.NewRequest("GET", "/v1/hotels", nil)
		if header != "" {
			req.Header.Set("traceparent", header)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		return sc, recording
	}
	if sc, rec := start(t, ""); rec || sc.IsSampled() || !sc.IsValid() {
		t.Errorf("root span: recording %v, sampled %v, valid %v; want an unsampled span with ids", rec, sc.IsSampled(), sc.IsValid())
	}
	sampled := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if sc, rec := start(t, sampled); !rec || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("child of a sampled parent: recording %v, trace %s; want it recorded in the caller's trace", rec, sc.TraceID())
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	if _, rec := start(t, ""); !rec {
		t.Error("OTEL_TRACES_SAMPLER=always_on: the root span is not recorded")
	}
}
