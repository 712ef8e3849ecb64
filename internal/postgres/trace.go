package postgres

import (
	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is what the store needs of the service's telemetry
// (telemetry.Telemetry) to trace its queries.
type Telemetry interface {
	TracerProvider() trace.TracerProvider
	MeterProvider() metric.MeterProvider
	Region() string
}

// queryTracer traces every query: one client span per query, batch and
// prepare, child of the request's span, with db.system=postgresql and the
// statement text (never its arguments). Queries outside a trace (the
// background jobs) make no spans. It also records the
// db.client.operation.duration histogram.
//
// Pool acquires are not traced: their span and histogram point cost about
// as much as a cached refusal's key read on a small machine (a twentieth of
// a booking service's CPU in a flash sale, docs/PERFORMANCE.md), and the
// pool reports its waits itself at no cost per acquire
// (berth_db_pool_empty_acquire_total, berth_db_pool_acquire_wait_seconds_total:
// DB.PoolStats).
func queryTracer(t Telemetry) pgx.QueryTracer {
	return otelpgx.NewTracer(append(tracerOptions(t), otelpgx.WithDisableAcquireTracer())...)
}

// tracerOptions are queryTracer's options but the one that turns the
// acquire tracer off.
func tracerOptions(t Telemetry) []otelpgx.Option {
	var attrs []attribute.KeyValue
	if r := t.Region(); r != "" {
		attrs = append(attrs, attribute.String("region", r))
	}
	return []otelpgx.Option{
		otelpgx.WithTracerProvider(t.TracerProvider()),
		otelpgx.WithMeterProvider(t.MeterProvider()),
		// db.system.name is the current convention; db.system is what most
		// backends still index.
		otelpgx.WithTracerAttributes(attribute.String("db.system", "postgresql")),
		otelpgx.WithMeterAttributes(attrs...),
		otelpgx.WithTrimSQLInSpanName(),
	}
}
