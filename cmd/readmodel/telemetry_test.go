package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/telemetry"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The read model's /metrics carries the RED series of the partner API and
// the lag of its consumers; a partner request is traced with its queries.
func TestTelemetry(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	s := newStack(t)
	spans := tracetest.NewInMemoryExporter()
	s.startReadModel(func(c *serveConfig) {
		c.telemetry = []telemetry.Option{telemetry.WithSyncSpanExporter(spans), telemetry.WithoutGlobals()}
	})
	traceID, _ := trace.TraceIDFromHex("5b8efff798038103d269b633813fc60c")
	status, _, body := s.get("/v1/guests/g1/reservations", map[string]string{
		"X-Api-Key": s.partnerKey("g1"), "traceparent": "00-" + traceID.String() + "-eee19b7ec3c1b174-01"})
	if status != http.StatusOK {
		t.Fatalf("partner list: %d %s", status, body)
	}
	var text string
	eventually(t, 30*time.Second, "consumer lag on /metrics", func() bool {
		resp, err := http.Get(s.rm.url + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		text = string(b)
		return strings.Contains(text, `berth_consumer_lag{consumer="readmodel"}`)
	})
	for _, want := range []string{"berth_readmodel_rounds_total", "berth_readmodel_round_events_total", "berth_readmodel_rounds_failed_total"} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if want := `http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="200",http_route="/v1/guests/{guest_id}/reservations"}`; !strings.Contains(text, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, text)
	}
	var server, db bool
	eventually(t, 10*time.Second, "the partner request's spans", func() bool {
		for _, sp := range spans.GetSpans() {
			if sp.SpanContext.TraceID() != traceID {
				continue
			}
			server = server || sp.SpanKind == trace.SpanKindServer
			for _, a := range sp.Attributes {
				db = db || a.Key == "db.system" && a.Value.AsString() == "postgresql"
			}
		}
		return server && db
	})
}
