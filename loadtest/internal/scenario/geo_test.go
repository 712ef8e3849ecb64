package scenario

import (
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
)

func geoStats(p50 float64) engine.OpStats {
	return engine.OpStats{Summary: engine.Summary{Count: 10, P50Ms: p50, P99Ms: 2 * p50}}
}

// The geo checks fail when a read is served outside the client's region or
// a write outside the home region, and the figures give each pair's write
// premium over a local write at its home next to the pair's round trip.
func TestGeoConclude(t *testing.T) {
	t.Parallel()
	g := &geoRun{regions: []string{"us-east", "eu-west"}, servedBy: map[string]map[string]int{}}
	ok := func(region string) client.Response {
		return client.Response{Status: http.StatusOK, Header: http.Header{"X-Berth-Served-By": {region}}}
	}
	g.served(geoOp("read", "eu-west", "us-east"), ok("eu-west"), nil)
	g.served(geoOp("write", "eu-west", "us-east"), ok("us-east"), nil)
	g.served(geoOp("read", "us-east", "us-east"), client.Response{Status: http.StatusServiceUnavailable}, nil) // not counted
	r := &report.Report{Figures: map[string]float64{}, Ops: map[string]engine.OpStats{
		geoOp("read", "eu-west", "us-east"):  geoStats(3),
		geoOp("write", "eu-west", "us-east"): geoStats(80),
		geoOp("write", "us-east", "us-east"): geoStats(5),
	}}
	g.conclude(r)
	for _, c := range r.Checks {
		if !c.OK {
			t.Errorf("%s: %s", c.Name, c.Detail)
		}
	}
	if got := r.Figures["write_extra_p50_ms eu-west>us-east"]; got != 75 {
		t.Errorf("write premium %v, want 75", got)
	}
	if got := r.Figures["wan_rtt_ms eu-west>us-east"]; got != 75 {
		t.Errorf("RTT %v, want 75", got)
	}

	g.served(geoOp("write", "eu-west", "us-east"), ok("eu-west"), nil)
	g.served(geoOp("read", "eu-west", "us-east"), ok("us-east"), nil)
	r = &report.Report{Figures: map[string]float64{}, Ops: map[string]engine.OpStats{}}
	g.conclude(r)
	failed := 0
	for _, c := range r.Checks {
		if !c.OK {
			failed++
			if !strings.Contains(c.Detail, "1 × ") {
				t.Errorf("%s: %s", c.Name, c.Detail)
			}
		}
	}
	if failed != 2 {
		t.Errorf("%d checks failed, want 2: %+v", failed, r.Checks)
	}
}
