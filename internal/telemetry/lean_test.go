package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// TestLeanMiddlewareSeries: the same requests through the lean way (a
// service that exports nothing) and through otelhttp (a sampler configured)
// give the same HTTP series on /metrics — names, help, types, labels,
// counts and body sizes (durations differ with time, their counts do not)
// — and the handler sees a span with ids either way.
func TestLeanMiddlewareSeries(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	serve := func(sampler string) string {
		t.Setenv("OTEL_TRACES_SAMPLER", sampler)
		tel, shutdown, err := telemetry.Setup(context.Background(), "booking", "eu-west", telemetry.WithoutGlobals())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = shutdown(context.Background()) }()
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/hotels/{hotel_id}/reservations", func(w http.ResponseWriter, r *http.Request) {
			if !trace.SpanContextFromContext(r.Context()).IsValid() {
				t.Error("the handler's context has no span")
			}
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), "full") {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusConflict)
				_, _ = w.Write([]byte(`{"code":"sold_out"}`))
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
			_, _ = w.Write([]byte("!"))
		})
		mux.HandleFunc("GET /v1/hotels/{hotel_id}", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"hotel_id":"x"}`)) // no WriteHeader: 200
		})
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
		h := tel.Middleware(mux)
		for _, req := range []struct{ method, path, body string }{
			{"POST", "/v1/hotels/a/reservations", `{"quantity":1}`},
			{"POST", "/v1/hotels/b/reservations", `{"quantity":2,"x":"yy"}`},
			{"POST", "/v1/hotels/b/reservations", `full`},
			{"GET", "/v1/hotels/a", ""},
			{"get", "/v1/hotels/a", ""},
			{"BREW", "/v1/hotels/a", ""},
			{"GET", "/nowhere", ""},
			{"GET", "/healthz", ""},
		} {
			r := httptest.NewRequest(req.method, req.path, strings.NewReader(req.body))
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		var keep []string
		for line := range strings.Lines(scrape(t, tel)) {
			name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE "), "{")
			if !strings.HasPrefix(name, "http_server_") || strings.HasPrefix(name, "http_server_request_duration_seconds_bucket") ||
				strings.HasPrefix(name, "http_server_request_duration_seconds_sum") {
				continue
			}
			keep = append(keep, strings.TrimSpace(line))
		}
		slices.Sort(keep)
		return strings.Join(keep, "\n")
	}
	lean := serve("")
	full := serve("parentbased_always_off")
	if lean != full {
		t.Fatalf("the lean way's series differ from otelhttp's:\nlean:\n%s\n\notelhttp:\n%s", lean, full)
	}
	for _, want := range []string{`http_route="/v1/hotels/{hotel_id}/reservations"`, `http_response_status_code="409"`,
		`http_request_method="_OTHER"`, "http_server_response_body_size_bytes_sum", "http_server_request_body_size_bytes_sum"} {
		if !strings.Contains(lean, want) {
			t.Fatalf("no %s in:\n%s", want, lean)
		}
	}
}
