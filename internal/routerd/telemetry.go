package routerd

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/berthhq/berth/internal/router"
	"github.com/berthhq/berth/internal/telemetry"
)

// apiWords are the fixed path segments of the API; any other segment is an
// id, so RED series stay per route (/v1/hotels/{id}/reservations), not per
// partition.
var apiWords = wordSet("v1", "hotels", "clinics", "guests", "placements", "payments", "webhooks", "webhook",
	"reservations", "appointments", "room-types", "inventory", "availability", "search", "doctors", "slots",
	"materialize", "block", "audit", "confirm", "cancel", "reschedule", "move", "waiting-room", "tickets",
	"healthz", "readyz")

func wordSet(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// instrument serves /metrics (the router's own counters, the rate
// limiter's decisions when lim is set, and the OTel families on one page)
// and wraps every other request in the proxy's telemetry middleware: a span
// continuing the client's trace (the upstream transport carries it on to
// the booking service), RED metrics per route template — the hop's one
// layer of HTTP instrumentation (telemetry.ProxyMiddleware, HopTransport).
func instrument(tel *telemetry.Telemetry, rt *router.Router, lim *ratelimit.Limiter) http.Handler {
	write := rt.WriteMetrics
	if lim != nil {
		write = func(w io.Writer) { rt.WriteMetrics(w); lim.WriteMetrics(w) }
	}
	metrics := tel.MetricsHandler(telemetry.TextGatherer(write))
	traced := tel.ProxyMiddleware(func(r *http.Request) string {
		return telemetry.PathTemplate(r.URL.Path, apiWords)
	}, rt)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, r)
			return
		}
		traced.ServeHTTP(w, r)
	})
}

// flushWithin flushes pending spans, giving up after d.
func flushWithin(flush func(context.Context) error, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = flush(ctx)
}
