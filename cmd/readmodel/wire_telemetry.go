package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/notify"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/readmodel"
	"github.com/berthhq/berth/internal/telemetry"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
)

// instrument serves /metrics and wraps the partner API in the telemetry
// middleware (a span per request, RED metrics per route).
func instrument(tel *telemetry.Telemetry, api http.Handler) http.Handler {
	metrics := tel.MetricsHandler()
	traced := tel.Middleware(api)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, r)
			return
		}
		traced.ServeHTTP(w, r)
	})
}

// lagInterval is how often the consumers' backlogs are read from NATS.
const lagInterval = 5 * time.Second

// recordConsumerLag records berth_consumer_lag for each durable consumer of
// this process until ctx ends. A consumer not created yet (or disabled, as
// notifications may be) is skipped and asked again soon.
func recordConsumerLag(ctx context.Context, tel *telemetry.Telemetry, js jetstream.JetStream) {
	for {
		wait := lagInterval
		for _, c := range []string{readmodel.ConsumerName, notify.ConsumerName, payments.RefundsConsumer} {
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			n, err := natsbus.Pending(qctx, js, c)
			cancel()
			if err != nil {
				wait = min(wait, 500*time.Millisecond)
				continue
			}
			tel.ConsumerLag(ctx, c, int64(n))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// observeRounds reports the projection's rounds on every scrape
// (docs/adr/0021-read-model-rounds.md): rounds of several events run, the
// events they carried, and the rounds that failed (their events then
// applied alone). Events per round is
// rate(berth_readmodel_round_events_total) / rate(berth_readmodel_rounds_total).
func observeRounds(tel *telemetry.Telemetry, proj *readmodel.Projector) error {
	m := tel.MeterProvider().Meter("github.com/berthhq/berth/cmd/readmodel")
	rounds, err1 := m.Int64ObservableCounter("berth.readmodel.rounds", metric.WithUnit("{statement}"),
		metric.WithDescription("Rounds of several events applied in one statement by the projection."))
	carried, err2 := m.Int64ObservableCounter("berth.readmodel.round_events", metric.WithUnit("{event}"),
		metric.WithDescription("Events carried by the projection's rounds of several events."))
	failed, err3 := m.Int64ObservableCounter("berth.readmodel.rounds_failed", metric.WithUnit("{statement}"),
		metric.WithDescription("Rounds whose statement failed; their events were then applied alone."))
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("round instruments: %w", err)
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		r, e, f := proj.Rounds()
		o.ObserveInt64(rounds, r)
		o.ObserveInt64(carried, e)
		o.ObserveInt64(failed, f)
		return nil
	}, rounds, carried, failed)
	return err
}

// flushWithin flushes pending spans, giving up after d.
func flushWithin(flush func(context.Context) error, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = flush(ctx)
}
