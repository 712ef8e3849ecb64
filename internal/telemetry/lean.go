package telemetry

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
	"go.opentelemetry.io/otel/trace"
)

// leanServer is Middleware's way for requests whose span is not recorded.
// Its instruments are otelhttp's own — same meter scope, names, units and
// buckets, so the SDK hands out the very instruments otelhttp records into
// — and it records them with the attributes the views keep (route, method,
// status code, region): the same series, whichever way a request went.
// TestLeanMiddlewareSeries compares the two ways' /metrics.
type leanServer struct {
	next, full http.Handler
	tracer     trace.Tracer
	region     attribute.KeyValue
	duration   httpconv.ServerRequestDuration
	reqSize    httpconv.ServerRequestBodySize
	respSize   httpconv.ServerResponseBodySize

	mu   sync.RWMutex
	sets map[seriesKey]metric.MeasurementOption
}

// seriesKey names one series; routes come from the ServeMux's patterns and
// methods are standardized, so there are few.
type seriesKey struct {
	route, method string
	status        int
}

func (t *Telemetry) lean(next, full http.Handler) http.Handler {
	meter := t.mp.Meter(otelhttp.ScopeName, metric.WithInstrumentationVersion(otelhttp.Version))
	l := &leanServer{next: next, full: full, sets: map[seriesKey]metric.MeasurementOption{},
		tracer: t.tp.Tracer(otelhttp.ScopeName, trace.WithInstrumentationVersion(otelhttp.Version))}
	if r := t.regionAttrs(); len(r) > 0 {
		l.region = r[0]
	}
	var err error
	// otelhttp's buckets (internal/semconv.NewHTTPServer).
	if l.duration, err = httpconv.NewServerRequestDuration(meter, metric.WithExplicitBucketBoundaries(
		0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)); err != nil {
		otel.Handle(err)
	}
	if l.reqSize, err = httpconv.NewServerRequestBodySize(meter); err != nil {
		otel.Handle(err)
	}
	if l.respSize, err = httpconv.NewServerResponseBodySize(meter); err != nil {
		otel.Handle(err)
	}
	return l
}

func (l *leanServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isProbe(r.URL.Path) {
		l.next.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), httpCarrier(r.Header))
	if trace.SpanContextFromContext(ctx).IsSampled() {
		// The span will be recorded: otelhttp gives it its attributes.
		l.full.ServeHTTP(w, r)
		return
	}
	ctx, span := l.tracer.Start(ctx, "", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	lw := &leanWriter{ResponseWriter: w}
	body := r.Body
	if body != nil && body != http.NoBody {
		lw.body.ReadCloser = body
		r.Body = &lw.body
		// net/http checks the body it gave the handler afterwards.
		defer func() { r.Body = body }()
	}
	rc := r.WithContext(ctx)
	l.next.ServeHTTP(lw, rc)
	status := lw.status
	if status == 0 {
		status = http.StatusOK
	}
	o := l.series(rc.Pattern, r.Method, status)
	l.reqSize.Inst().Record(ctx, lw.body.n, o)
	l.respSize.Inst().Record(ctx, lw.written, o)
	l.duration.Inst().Record(ctx, float64(time.Since(start))/float64(time.Second), o)
}

// series returns the attributes of one series, built once.
func (l *leanServer) series(pattern, method string, status int) metric.MeasurementOption {
	k := seriesKey{route: otelhttpRoute(pattern), method: otelhttpMethod(method), status: status}
	l.mu.RLock()
	o, ok := l.sets[k]
	l.mu.RUnlock()
	if ok {
		return o
	}
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(k.method), semconv.HTTPResponseStatusCode(status)}
	if k.route != "" {
		attrs = append(attrs, semconv.HTTPRoute(k.route))
	}
	if l.region.Valid() {
		attrs = append(attrs, l.region)
	}
	o = metric.WithAttributeSet(attribute.NewSet(attrs...))
	l.mu.Lock()
	l.sets[k] = o
	l.mu.Unlock()
	return o
}

// otelhttpRoute is otelhttp's route of a ServeMux pattern: the path part.
func otelhttpRoute(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return ""
}

// otelhttpMethod is otelhttp's http.request.method: a known method in
// upper case, anything else _OTHER.
func otelhttpMethod(method string) string {
	switch m := strings.ToUpper(method); m {
	case http.MethodConnect, http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodPatch, http.MethodPost, http.MethodPut, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// leanWriter counts what the handler writes and reads, as otelhttp's
// wrappers do, in one allocation.
type leanWriter struct {
	http.ResponseWriter
	status  int
	written int64
	body    countingBody
}

func (w *leanWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *leanWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

// Flush passes a flush on, as otelhttp's wrapper does.
func (w *leanWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the real writer (deadlines).
func (w *leanWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingBody counts the bytes the handler reads of the request body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}
