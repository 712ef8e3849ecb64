package postgres

import (
	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
)

// QueryTracerWithAcquireForTest is the store's query tracer with otelpgx's
// acquire tracing on as well, as the store had it before
// (BenchmarkPoolAcquire's other side).
func QueryTracerWithAcquireForTest(t Telemetry) pgx.QueryTracer {
	return otelpgx.NewTracer(tracerOptions(t)...)
}
