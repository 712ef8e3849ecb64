package main

import (
	"context"
	"net/http"
	"time"

	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/notify"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/readmodel"
	"github.com/berthhq/berth/internal/telemetry"
	"github.com/nats-io/nats.go/jetstream"
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

// flushWithin flushes pending spans, giving up after d.
func flushWithin(flush func(context.Context) error, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = flush(ctx)
}
