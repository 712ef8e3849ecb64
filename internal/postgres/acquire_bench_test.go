package postgres_test

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/telemetry"
)

// BenchmarkPoolAcquire is one pooled round trip (a ping: acquire, the
// empty query, release) under the service's telemetry, with the store's
// query tracer as shipped — pool acquires untraced, their waits read from
// the pool's own counts — and with otelpgx's acquire tracing on as well
// (its span when the request is traced, and its db.client.operation.duration
// point on every acquire), as the store had it before. client-cpu-ns/op is
// the benchmark process's CPU per round trip (the tracer's cost is the
// client's; the server's is the same on both sides). A flash sale's
// refused holds each make one such acquire for their key read.
//
//	go test -run '^$' -bench PoolAcquire -count 5 ./internal/postgres/
func BenchmarkPoolAcquire(b *testing.B) {
	env := bookingtest.Start(b, bookingtest.Options{})
	ctx := context.Background()
	tel, shutdown, err := telemetry.Setup(ctx, "booking", "us-east", telemetry.WithoutGlobals())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = shutdown(context.Background()) })
	withAcquire := postgres.QueryTracerWithAcquireForTest(tel)
	for _, c := range []struct {
		name string
		opts postgres.Options
	}{
		{"as-shipped", postgres.Options{MaxConns: 2, Telemetry: tel}},
		{"acquire-traced", postgres.Options{MaxConns: 2, Tracer: withAcquire}},
	} {
		b.Run(c.name, func(b *testing.B) {
			db, err := postgres.Open(ctx, env.DBURL, c.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if err := db.Ping(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for range b.N {
				if err := db.Ping(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "client-cpu-ns/op")
		})
	}
}
