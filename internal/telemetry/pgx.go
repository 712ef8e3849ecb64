package telemetry

import (
	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
)

// PgxTracer returns the tracer to put in pgx's connection config
// (postgres.Options.Tracer): one client span per query, batch, prepare and
// pool acquire, child of the request's span, with db.system=postgresql and
// the statement text (never its arguments). Queries outside a trace (the
// background jobs) make no spans. It also records the
// db.client.operation.duration histogram.
func (t *Telemetry) PgxTracer() pgx.QueryTracer {
	return otelpgx.NewTracer(
		otelpgx.WithTracerProvider(t.tp),
		otelpgx.WithMeterProvider(t.mp),
		// db.system.name is the current convention; db.system is what most
		// backends still index.
		otelpgx.WithTracerAttributes(attribute.String("db.system", "postgresql")),
		otelpgx.WithMeterAttributes(t.regionAttrs()...),
		otelpgx.WithTrimSQLInSpanName(),
	)
}
