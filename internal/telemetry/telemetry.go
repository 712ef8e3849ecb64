// Package telemetry is how every Berth binary reports on itself: traces
// (OpenTelemetry, exported over OTLP/HTTP only when the standard OTEL_*
// variables ask for it), metrics (OpenTelemetry instruments read by the
// Prometheus exporter and served on /metrics), and slog records carrying the
// trace and span ids of the context they were logged with.
//
// It also owns the propagation of trace context across every hop a request
// makes: HTTP servers and clients (W3C tracecontext + baggage), PostgreSQL
// queries (a pgx tracer) and NATS messages (headers).
//
// Setup builds it once per process; the returned Telemetry hands out the
// pieces the binary wires by hand. Nothing here is global except the
// propagator and the default providers, which are set so that packages using
// otel.Tracer/otel.Meter (the event relay, consumers) join the same pipeline.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of Berth's own instruments and spans.
const scope = "github.com/berthhq/berth"

// Telemetry is one process's tracer and meter providers, its Prometheus
// registry and Berth's named instruments.
type Telemetry struct {
	service, region string
	tp              *sdktrace.TracerProvider
	mp              *sdkmetric.MeterProvider
	registry        *prometheus.Registry
	meter           metric.Meter
	tracer          trace.Tracer
	exporting       bool
	// rootsUnsampled: spans are recorded only under a sampled parent
	// (no exporter, no OTEL_TRACES_SAMPLER), which ProxyMiddleware and
	// Middleware's lean way use.
	rootsUnsampled bool
	inst           instruments
	// regionOnly is attrs() built once: the attributes of a series labelled
	// by the region alone, recorded per event (SearchLag), where building
	// the set each time was about 1 % of a booking service's CPU under holds.
	regionOnly metric.MeasurementOption
	// outcomeSets caches the attributes of BookingOutcome's series.
	outcomeSets struct {
		sync.RWMutex
		m map[outcomeKey]metric.MeasurementOption
	}
}

// Option adjusts Setup.
type Option func(*options)

type options struct {
	spanExporters []sdktrace.SpanExporter
	setGlobals    bool
}

// WithSyncSpanExporter sends every ended span to e synchronously (tests pass
// a tracetest.InMemoryExporter), in addition to any OTLP export.
func WithSyncSpanExporter(e sdktrace.SpanExporter) Option {
	return func(o *options) { o.spanExporters = append(o.spanExporters, e) }
}

// WithoutGlobals leaves the global tracer and meter providers alone (tests
// that run several services in one process). The propagator is still set.
func WithoutGlobals() Option { return func(o *options) { o.setGlobals = false } }

// Setup builds the telemetry of one service in one region. Traces are
// exported over OTLP/HTTP only when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and OTEL_SDK_DISABLED is not
// true; every other OTEL_* variable (headers, sampler, batch sizes, resource
// attributes) is read by the SDK itself. Without an exporter (and without
// OTEL_TRACES_SAMPLER) spans start unsampled unless their parent is sampled:
// they still carry ids, so logs carry trace ids and context still
// propagates to the next hop, but nothing records what nobody reads.
//
// shutdown flushes pending spans and stops the providers; call it last,
// after the work that may still emit telemetry has stopped.
func Setup(ctx context.Context, service, region string, opts ...Option) (*Telemetry, func(context.Context) error, error) {
	o := options{setGlobals: true}
	for _, opt := range opts {
		opt(&o)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(service)}
	if region != "" { // the read model serves every region
		attrs = append(attrs, semconv.CloudRegion(region))
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the defaults.
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry resource: %w", err)
	}
	t := &Telemetry{service: service, region: region, registry: prometheus.NewRegistry()}
	t.regionOnly = t.attrs()

	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if otlpEnabled() {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
		t.exporting = true
	}
	for _, e := range o.spanExporters {
		tpOpts = append(tpOpts, sdktrace.WithSyncer(e))
	}
	if !t.exporting && len(o.spanExporters) == 0 && os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		// Nothing leaves the process, so recording spans (their attributes,
		// events, timings) is work for nobody: about a tenth of a hold's CPU
		// in each service (docs/PERFORMANCE.md, "CPU per hold"). Spans still
		// get ids (logs carry trace_id, context propagates to the next hop),
		// and a trace sampled upstream is still recorded, so a service that
		// does export downstream of this one keeps its spans.
		tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
		t.rootsUnsampled = true
	}
	t.tp = sdktrace.NewTracerProvider(tpOpts...)

	// The process and Go runtime collectors are what every SRE dashboard
	// expects next to the service's own series.
	t.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	promExp, err := otelprom.New(otelprom.WithRegisterer(t.registry), otelprom.WithoutScopeInfo())
	if err != nil {
		_ = t.tp.Shutdown(ctx)
		return nil, nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(promExp),
		sdkmetric.WithView(httpViews()...),
		// The text format /metrics serves carries no exemplars, and the
		// attributes the HTTP views drop would overflow their label limit.
		sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter),
	)
	t.meter = t.mp.Meter(scope)
	t.tracer = t.tp.Tracer(scope)
	if err := t.inst.init(t.meter); err != nil {
		_ = t.tp.Shutdown(ctx)
		_ = t.mp.Shutdown(ctx)
		return nil, nil, err
	}
	// Known label sets start at zero, so a dashboard's rate() has a series
	// before the first retry.
	for _, reason := range []string{"40001", "40P01"} {
		t.inst.retries.Add(ctx, 0, t.attrs(attribute.String("reason", reason)))
	}

	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if o.setGlobals {
		otel.SetTracerProvider(t.tp)
		otel.SetMeterProvider(t.mp)
	}
	shutdown := func(ctx context.Context) error {
		// Spans first: a flush may still need the network; metrics are
		// pulled, so stopping the meter provider loses nothing.
		return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
	}
	return t, shutdown, nil
}

// otlpEnabled reports whether the standard variables ask for OTLP export.
func otlpEnabled() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// httpViews keep the HTTP instruments' series bounded: only the route
// pattern, method, status code and region survive (otelhttp also records
// server.address from the client-controlled Host header, and the peer port).
func httpViews() []sdkmetric.View {
	server := attribute.NewAllowKeysFilter(
		semconv.HTTPRouteKey, semconv.HTTPRequestMethodKey, semconv.HTTPResponseStatusCodeKey, regionKey)
	client := attribute.NewAllowKeysFilter(
		semconv.HTTPRequestMethodKey, semconv.HTTPResponseStatusCodeKey, semconv.ServerAddressKey, regionKey)
	return []sdkmetric.View{
		sdkmetric.NewView(sdkmetric.Instrument{Name: "http.server.*"}, sdkmetric.Stream{AttributeFilter: server}),
		sdkmetric.NewView(sdkmetric.Instrument{Name: "http.client.*"}, sdkmetric.Stream{AttributeFilter: client}),
	}
}

// Exporting reports whether spans leave the process (OTLP is configured).
func (t *Telemetry) Exporting() bool { return t.exporting }

// TracerProvider is the process's tracer provider.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// MeterProvider is the process's meter provider (for instruments other
// packages create themselves).
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.mp }

// Tracer is Berth's own tracer.
func (t *Telemetry) Tracer() trace.Tracer { return t.tracer }

// Region is the region every series is labelled with.
func (t *Telemetry) Region() string { return t.region }

// MetricsHandler serves the registry in the Prometheus text format, plus
// the families of extra gatherers (see TextGatherer).
func (t *Telemetry) MetricsHandler(extra ...prometheus.Gatherer) http.Handler {
	g := prometheus.Gatherers{t.registry}
	g = append(g, extra...)
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
