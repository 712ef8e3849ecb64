package telemetry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TextGatherer adapts a writer of Prometheus text (the router's
// hand-rolled counters) so MetricsHandler can serve its families next to
// the OTel ones on one /metrics.
func TextGatherer(write func(io.Writer)) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		var buf bytes.Buffer
		write(&buf)
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(&buf)
		if err != nil {
			return nil, fmt.Errorf("legacy metrics: %w", err)
		}
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, f := range fams {
			out = append(out, f)
		}
		return out, nil
	})
}

// Routed sets the request's Pattern from route before next runs, for
// handlers that route without a ServeMux (the router forwards by path), so
// Middleware can label spans and RED metrics by route. A request that
// already has a pattern keeps it.
func Routed(route func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Pattern == "" {
			r.Pattern = route(r)
		}
		next.ServeHTTP(w, r)
	})
}

// PathTemplate turns a path into a low-cardinality route: segments found in
// words stay, any other segment (an id) becomes {id}, and paths deeper than
// eight segments are cut to "/…". Keep words to the API's fixed segments.
func PathTemplate(path string, words map[string]bool) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) > 8 {
		return "/…"
	}
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		switch {
		case s == "":
		case words[s]:
			b.WriteString(s)
		default:
			b.WriteString("{id}")
		}
	}
	return b.String()
}
