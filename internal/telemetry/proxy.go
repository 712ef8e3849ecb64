package telemetry

import (
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ProxyMiddleware is Middleware for a proxy (the router), whose every
// request is one hop to an upstream and whose own work is small, so the
// instrumentation's share of it is large. It keeps what Middleware gives
// an operator — the http.server.request.duration series labelled by route
// (route(r), also set as the request's Pattern), method, status code and
// region, and a server span continuing the caller's trace — at a fraction
// of the cost when the trace is not sampled (every request, without an
// exporter): the caller's context is extracted and a span id minted, so
// logs and the upstream hop stay in the caller's trace, and one histogram
// value is recorded with a cached attribute set. otelhttp builds every span
// and metric attribute whether or not the span records, wraps the body and
// the writer, and records two body-size histograms besides; a sampled
// request, or any request when roots may be sampled (an exporter or
// OTEL_TRACES_SAMPLER is set), still goes through it for its span.
// Health and metrics probes are neither traced nor measured.
func (t *Telemetry) ProxyMiddleware(route func(*http.Request) string, next http.Handler) http.Handler {
	// Spans only: the duration is recorded below for both paths, once.
	traced := otelhttp.NewHandler(next, t.service,
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()),
		otelhttp.WithServerName(t.service),
	)
	duration, err := t.meter.Float64Histogram("http.server.request.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of HTTP server requests."),
		// otelhttp's boundaries: the series reads as it did.
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10))
	if err != nil {
		otel.Handle(err) // a misconfigured view: the histogram is a no-op
	}
	p := &proxyMiddleware{t: t, traced: traced, next: next, route: route, duration: duration,
		prop: otel.GetTextMapPropagator(), region: t.regionAttrs()}
	return p
}

type proxyMiddleware struct {
	t            *Telemetry
	traced, next http.Handler
	route        func(*http.Request) string
	duration     metric.Float64Histogram
	prop         propagation.TextMapPropagator
	region       []attribute.KeyValue
	sets         sync.Map // routeKey → metric.MeasurementOption
}

// routeKey names one series: the route is a template, the method one of
// the standard ones or _OTHER, so the set of keys stays small.
type routeKey struct {
	route, method string
	status        int
}

func (p *proxyMiddleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isProbe(r.URL.Path) {
		p.next.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	if r.Pattern == "" {
		r.Pattern = p.route(r)
	}
	sw := &StatusRecorder{ResponseWriter: w}
	ctx := p.prop.Extract(r.Context(), httpCarrier(r.Header))
	if !p.t.rootsUnsampled || trace.SpanContextFromContext(ctx).IsSampled() {
		p.traced.ServeHTTP(sw, r)
	} else {
		// Not recorded (the sampler's decision for an unsampled parent or
		// a root), but a span context of the router's own: the upstream's
		// parent and the logs' span id.
		ctx, span := p.t.tracer.Start(ctx, r.Pattern, trace.WithSpanKind(trace.SpanKindServer))
		p.next.ServeHTTP(sw, r.WithContext(ctx))
		span.End()
	}
	status := sw.Status
	if status == 0 {
		status = http.StatusOK
	}
	p.duration.Record(r.Context(), time.Since(start).Seconds(), p.attrs(routeKey{r.Pattern, otelhttpMethod(r.Method), status}))
}

// attrs returns the cached attribute set of one series.
func (p *proxyMiddleware) attrs(k routeKey) metric.MeasurementOption {
	if o, ok := p.sets.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	kv := append([]attribute.KeyValue{
		semconv.HTTPRoute(k.route),
		semconv.HTTPRequestMethodKey.String(k.method),
		semconv.HTTPResponseStatusCode(k.status),
	}, p.region...)
	o, _ := p.sets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kv...)))
	return o.(metric.MeasurementOption)
}

// StatusRecorder remembers the status a handler writes (Status), for
// metrics and logs.
type StatusRecorder struct {
	http.ResponseWriter
	Status int
}

func (s *StatusRecorder) WriteHeader(code int) {
	if s.Status == 0 {
		s.Status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusRecorder) Write(b []byte) (int, error) {
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *StatusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
