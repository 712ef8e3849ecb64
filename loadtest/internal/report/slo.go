package report

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// OpSLO are the objectives of one operation; a zero field is not checked.
type OpSLO struct {
	P50Ms         float64 `json:"p50_ms,omitempty"`
	P99Ms         float64 `json:"p99_ms,omitempty"`
	P999Ms        float64 `json:"p999_ms,omitempty"`
	MaxErrorRate  float64 `json:"max_error_rate,omitempty"`
	MinThroughput float64 `json:"min_throughput_per_s,omitempty"`
}

// SLO is the configuration a run is judged by (YAML or JSON):
//
//	ops:
//	  hold: {p99_ms: 100, max_error_rate: 0.001}
//	  availability: {p99_ms: 25}
//	max_error_rate: 0.01   # every operation
//	max_dropped: 0         # arrivals the generator could not start
type SLO struct {
	Ops          map[string]OpSLO `json:"ops,omitempty"`
	MaxErrorRate *float64         `json:"max_error_rate,omitempty"`
	MaxDropped   *int64           `json:"max_dropped,omitempty"`
}

// SLOResult is one evaluated objective.
type SLOResult struct {
	Name   string  `json:"name"`
	Limit  float64 `json:"limit"`
	Actual float64 `json:"actual"`
	OK     bool    `json:"ok"`
}

// LoadSLO reads an SLO file (YAML or JSON).
func LoadSLO(path string) (SLO, error) {
	var s SLO
	data, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("read slo: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return s, fmt.Errorf("decode slo %s: %w", path, err)
	}
	return s, nil
}

// ParseOpLimits parses flag values "op=value" (e.g. "hold=100") into the
// field chosen by set.
func (s *SLO) ParseOpLimits(values []string, set func(*OpSLO, float64)) error {
	for _, v := range values {
		op, num, ok := strings.Cut(v, "=")
		f, err := strconv.ParseFloat(strings.TrimSuffix(num, "ms"), 64)
		if !ok || err != nil || op == "" {
			return fmt.Errorf("want op=number, got %q", v)
		}
		if s.Ops == nil {
			s.Ops = map[string]OpSLO{}
		}
		o := s.Ops[op]
		set(&o, f)
		s.Ops[op] = o
	}
	return nil
}

// Evaluate judges r against s. An objective on an operation the run never
// performed is a miss: a renamed operation must not pass silently.
func Evaluate(s SLO, r *Report) []SLOResult {
	var out []SLOResult
	add := func(name string, limit, actual float64, ok bool) {
		out = append(out, SLOResult{Name: name, Limit: limit, Actual: actual, OK: ok})
	}
	ops := make([]string, 0, len(s.Ops))
	for op := range s.Ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		o := s.Ops[op]
		st, ran := r.Ops[op]
		if !ran || st.Count == 0 {
			add(op+" ran", 1, 0, false)
			continue
		}
		if o.P50Ms > 0 {
			add(op+" p50_ms", o.P50Ms, st.P50Ms, st.P50Ms <= o.P50Ms)
		}
		if o.P99Ms > 0 {
			add(op+" p99_ms", o.P99Ms, st.P99Ms, st.P99Ms <= o.P99Ms)
		}
		if o.P999Ms > 0 {
			add(op+" p999_ms", o.P999Ms, st.P999Ms, st.P999Ms <= o.P999Ms)
		}
		if o.MaxErrorRate > 0 {
			er := ErrorRate(st)
			add(op+" error_rate", o.MaxErrorRate, er, er <= o.MaxErrorRate)
		}
		if o.MinThroughput > 0 {
			add(op+" throughput_per_s", o.MinThroughput, st.Throughput, st.Throughput >= o.MinThroughput)
		}
	}
	if s.MaxErrorRate != nil {
		for _, op := range r.OpNames() {
			er := ErrorRate(r.Ops[op])
			add(op+" error_rate (global)", *s.MaxErrorRate, er, er <= *s.MaxErrorRate)
		}
	}
	if s.MaxDropped != nil {
		add("dropped arrivals", float64(*s.MaxDropped), float64(r.Engine.Dropped), r.Engine.Dropped <= *s.MaxDropped)
	}
	return out
}
