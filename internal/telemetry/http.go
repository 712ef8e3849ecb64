package telemetry

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Middleware traces every request the server handles (continuing the
// caller's trace from its traceparent header) and records the RED metrics
// http.server.request.duration — Prometheus
// http_server_request_duration_seconds{http_route,http_request_method,http_response_status_code,region} —
// and otelhttp's request and response body sizes. The route is the ServeMux
// pattern that matched, so next must hand the request it was given to its
// ServeMux (http.Request.Pattern is set there). Health and metrics probes
// are neither traced nor measured.
//
// A request whose span will not be recorded (no exporter and no sampler
// configured, and no sampled caller: every request of a service that
// exports nothing) takes a lean way, lean.go: its span still carries ids
// (logs, the next hop), and its metrics are the same series, but none of
// otelhttp's per-request attribute building, wrapping and copying, which
// was about a twentieth of a booking service's CPU per hold. Any request
// that may be recorded goes through otelhttp, attributes and all.
func (t *Telemetry) Middleware(next http.Handler) http.Handler {
	region := t.regionAttrs()
	full := otelhttp.NewHandler(next, t.service,
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithMeterProvider(t.mp),
		// A fixed server name: otherwise server.address comes from the Host
		// header, which any client may set.
		otelhttp.WithServerName(t.service),
		otelhttp.WithMetricAttributesFn(func(*http.Request) []attribute.KeyValue { return region }),
		otelhttp.WithFilter(func(r *http.Request) bool { return !isProbe(r.URL.Path) }),
	)
	if !t.rootsUnsampled {
		return full
	}
	return t.lean(next, full)
}

func isProbe(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

// Transport wraps base (http.DefaultTransport when nil) so outgoing requests
// carry the trace context of their request's context and get a client span:
// the router → booking hop stays in one trace.
func (t *Telemetry) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithMeterProvider(t.mp),
		otelhttp.WithMetricAttributesFn(func(*http.Request) []attribute.KeyValue { return t.regionAttrs() }),
	)
}

// HopTransport wraps base for a proxy's upstream hop, whose server side
// ProxyMiddleware already measures: one layer of instrumentation per request,
// not two. The trace context always travels on (W3C traceparent), so the
// upstream's spans and logs join the caller's trace; a client span is
// recorded only when the request's trace is sampled (otherwise nobody would
// read it), and no http.client.* metrics are recorded — the proxy's server
// series already time the hop, and its own counters count the upstream's
// failures. With tracing off, otelhttp on both sides of the hop cost
// about a fifth of the router's CPU (ADR 0017), and the transport's body
// wrapper made net/http send the headers and the body in two writes.
func (t *Telemetry) HopTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &hopTransport{
		base: base,
		prop: otel.GetTextMapPropagator(),
		traced: otelhttp.NewTransport(base,
			otelhttp.WithTracerProvider(t.tp),
			otelhttp.WithMeterProvider(noop.NewMeterProvider()),
		),
	}
}

type hopTransport struct {
	base, traced http.RoundTripper
	prop         propagation.TextMapPropagator
}

func (h *hopTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	sc := trace.SpanContextFromContext(r.Context())
	if sc.IsSampled() {
		return h.traced.RoundTrip(r)
	}
	if !sc.IsValid() {
		return h.base.RoundTrip(r)
	}
	// A RoundTripper must not modify its request: the context goes into a
	// shallow copy's own header map (the body is shared and consumed once,
	// as the base transport would). The map is the copy's, with room for
	// the trace context; the value slices are shared, capped at their
	// length — Set replaces a slice, Add reallocates it, so nothing written
	// to the copy reaches the caller's header (the values needn't be
	// copied, as http.Header.Clone does).
	out := r.WithContext(r.Context())
	out.Header = make(http.Header, len(r.Header)+1)
	for k, v := range r.Header {
		out.Header[k] = v[:len(v):len(v)]
	}
	h.prop.Inject(r.Context(), httpCarrier(out.Header))
	return h.base.RoundTrip(out)
}

// Outcomes counts booking outcomes (berth_booking_outcomes_total) from the
// responses themselves, so no handler needs to know about metrics. ops maps
// a ServeMux pattern ("POST /v1/hotels/{hotel_id}/reservations") to the
// operation it is ("hotel.hold"); other routes are not counted. The code is
// "ok" for a 2xx answer, else the problem's code (or "http_<status>" when
// the body is not a problem document).
func (t *Telemetry) Outcomes(ops map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &outcomeWriter{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		op, ok := ops[r.Pattern] // set by the ServeMux inside next
		if !ok {
			return
		}
		t.BookingOutcome(r.Context(), op, rec.code())
	})
}

// outcomeWriter remembers the status and the first bytes of a problem body.
type outcomeWriter struct {
	http.ResponseWriter
	status  int
	problem bool
	body    bytes.Buffer
}

// maxProblem bounds what is kept of a problem body: the code comes early.
const maxProblem = 4 << 10

func (w *outcomeWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
		w.problem = strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json")
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *outcomeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.problem && w.body.Len() < maxProblem {
		w.body.Write(p[:min(len(p), maxProblem-w.body.Len())])
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the real writer (Flush, deadlines).
func (w *outcomeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *outcomeWriter) code() string {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	if status >= 200 && status < 300 {
		return "ok"
	}
	if w.problem {
		var doc struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(w.body.Bytes(), &doc) == nil && doc.Code != "" {
			return doc.Code
		}
	}
	return "http_" + strconv.Itoa(status)
}
