package natsbus_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/postgres"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The relay counts its rounds and the events they published, so that the
// events per round (what a round's statements are shared by) can be read
// off /metrics under load: 25 events relayed 10 a round are 25 events in at
// least 3 rounds, and each of them reached the stream.
func TestRelayCountsRoundsAndEvents(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, _ := dbtest.New(t, postgres.Options{})
	pool := dbtest.SQL(db)
	insertUnsent(t, ctx, pool, 25)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	js := relayJetStream(t, "relay-metrics-test", quiet)
	reader := sdkmetric.NewManualReader()
	relay := natsbus.NewRelay(js, postgres.NewStore(db, "us-east", time.Minute), natsbus.RelayConfig{
		Region: "us-east", Batch: 10, Poll: 10 * time.Millisecond, Log: quiet,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { relay.Run(run) })
	for {
		var unsent int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil {
			t.Fatal(err)
		}
		if unsent == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d events never relayed", unsent)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range s.DataPoints {
					if r, _ := p.Attributes.Value("region"); r.AsString() != "us-east" {
						t.Errorf("%s counted for region %q", m.Name, r.AsString())
					}
					sums[m.Name] += p.Value
				}
			}
		}
	}
	if got := sums["berth.outbox.relay.events"]; got != 25 {
		t.Errorf("berth.outbox.relay.events = %d, want the 25 events relayed", got)
	}
	if got := sums["berth.outbox.relay.rounds"]; got < 3 {
		t.Errorf("berth.outbox.relay.rounds = %d, want at least the 3 rounds 25 events take 10 at a time", got)
	}
	info, err := js.Stream(ctx, natsbus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 25 {
		t.Errorf("the stream holds %d messages, want 25", n)
	}
}
