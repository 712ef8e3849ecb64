package report

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/loadtest/internal/engine"
)

func sample() *Report {
	rec := engine.NewRecorder()
	for i := 1; i <= 100; i++ {
		rec.Record("hold", time.Duration(i)*time.Millisecond, "ok")
	}
	for range 10 {
		rec.Record("hold", time.Millisecond, "sold_out")
	}
	rec.Record("hold", time.Millisecond, "transport")
	rec.Tick(rec.Start().Add(time.Second))
	rec.Record("availability", 3*time.Millisecond, "ok")
	rec.Tick(rec.Start().Add(2 * time.Second))
	return &Report{Scenario: "test", StartedAt: time.Unix(0, 0).UTC(), Ops: rec.Ops(time.Second), Timeline: rec.Timeline(),
		Checks:  []Check{{Name: "inventory", OK: true, Detail: "fine"}},
		Samples: []Sample{{T: 0, Values: map[string]float64{"outbox_unsent": 3}}, {T: 5, Values: map[string]float64{"outbox_unsent": 4}}}}
}

func TestSLOEvaluation(t *testing.T) {
	t.Parallel()
	r := sample()
	maxErr := 0.05
	zero := int64(0)
	s := SLO{Ops: map[string]OpSLO{
		"hold":    {P99Ms: 50, MaxErrorRate: 0.001}, // p99 ≈ 99 ms: missed; 1/111 transport: missed
		"nothing": {P99Ms: 10},                      // never ran: missed
	}, MaxErrorRate: &maxErr, MaxDropped: &zero}
	res := Evaluate(s, r)
	got := map[string]bool{}
	for _, x := range res {
		got[x.Name] = x.OK
	}
	want := map[string]bool{"hold p99_ms": false, "hold error_rate": false, "nothing ran": false,
		"hold error_rate (global)": true, "availability error_rate (global)": true, "dropped arrivals": true}
	for k, v := range want {
		if ok, present := got[k]; !present || ok != v {
			t.Errorf("%s: got %v (present %v), want %v", k, ok, present, v)
		}
	}
	r.SLO = res
	r.Finish()
	if r.Status != StatusFail {
		t.Errorf("status %s, want fail", r.Status)
	}
	r.SLO = Evaluate(SLO{Ops: map[string]OpSLO{"hold": {P99Ms: 200}}}, r)
	r.Finish()
	if r.Status != StatusPass {
		t.Errorf("status %s, want pass", r.Status)
	}
	r.Checks = append(r.Checks, Check{Name: "one winner", OK: false})
	r.Finish()
	if r.Status != StatusFail {
		t.Errorf("a violated invariant must fail the run whatever the SLOs")
	}
}

func TestSLOFileAndFlags(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "slo.yaml")
	os.WriteFile(p, []byte("ops:\n  hold: {p99_ms: 100}\nmax_error_rate: 0.01\n"), 0o644)
	s, err := LoadSLO(p)
	if err != nil || s.Ops["hold"].P99Ms != 100 || *s.MaxErrorRate != 0.01 {
		t.Fatalf("%+v %v", s, err)
	}
	os.WriteFile(p, []byte("opps: {}\n"), 0o644)
	if _, err := LoadSLO(p); err == nil {
		t.Fatal("unknown field accepted")
	}
	if err := s.ParseOpLimits([]string{"availability=25ms"}, func(o *OpSLO, v float64) { o.P99Ms = v }); err != nil || s.Ops["availability"].P99Ms != 25 {
		t.Fatalf("%+v %v", s, err)
	}
	if err := s.ParseOpLimits([]string{"bad"}, func(o *OpSLO, v float64) {}); err == nil {
		t.Fatal("bad flag accepted")
	}
}

func TestReportRoundTripAndHTML(t *testing.T) {
	t.Parallel()
	r := sample()
	r.Finish()
	dir := t.TempDir()
	jp, hp, err := r.Write(dir, "run")
	if err != nil {
		t.Fatal(err)
	}
	back, err := Load(jp)
	if err != nil || back.Ops["hold"].Count != 111 || len(back.Timeline) != 2 {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	html, _ := os.ReadFile(hp)
	s := string(html)
	for _, want := range []string{"<svg", "Latency over time", "Throughput", "Outcome mix", "sold_out", "polyline", "Gauge: outbox_unsent"} {
		if !strings.Contains(s, want) {
			t.Errorf("html lacks %q", want)
		}
	}
	for _, banned := range []string{"http://cdn", "https://", "<script src", "<link"} {
		if strings.Contains(s, banned) {
			t.Errorf("html is not self-contained: %q", banned)
		}
	}
	// Every SVG must be well-formed XML.
	for _, part := range strings.Split(s, "<svg")[1:] {
		svg := "<svg" + part[:strings.Index(part, "</svg>")] + "</svg>"
		if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
			t.Fatalf("bad svg: %v", err)
		}
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	a, b := sample(), sample()
	st := b.Ops["hold"]
	st.P99Ms *= 2
	b.Ops["hold"] = st
	var out bytes.Buffer
	Compare(&out, a, b)
	if !strings.Contains(out.String(), "+100.0%") || !strings.Contains(out.String(), "availability") {
		t.Fatalf("compare:\n%s", out.String())
	}
}
