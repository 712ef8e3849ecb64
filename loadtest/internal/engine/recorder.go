// Package engine is the load generator of the loadtest suite: an open-loop
// scheduler that starts work at a constant arrival rate, measures every
// operation from its intended start (so a slow system cannot slow the
// generator down and hide its own latency: no coordinated omission), and a
// recorder of HDR latency histograms, per-second timelines and outcomes.
package engine

import (
	"sort"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds between 1 µs and 5 minutes with
// three significant digits (0.1 % relative error at every magnitude).
const (
	minMicros = 1
	maxMicros = int64(5 * time.Minute / time.Microsecond)
	sigFigs   = 3
)

func newHist() *hdr.Histogram { return hdr.New(minMicros, maxMicros, sigFigs) }

// Summary is the distribution of one operation's latencies.
type Summary struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func ms(us int64) float64 { return float64(us) / 1000 }

func summarize(h *hdr.Histogram) Summary {
	if h.TotalCount() == 0 {
		return Summary{}
	}
	return Summary{
		Count: h.TotalCount(), MeanMs: h.Mean() / 1000,
		P50Ms: ms(h.ValueAtQuantile(50)), P90Ms: ms(h.ValueAtQuantile(90)),
		P99Ms: ms(h.ValueAtQuantile(99)), P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs: ms(h.Max()),
	}
}

// OpStats is what a run learned about one operation.
type OpStats struct {
	Summary
	// Outcomes counts answers by kind: "ok", a problem code such as
	// "sold_out", "http_502" for a non-problem error, "transport", "timeout".
	Outcomes map[string]int64 `json:"outcomes"`
	// Throughput is completions per second over the measured duration.
	Throughput float64 `json:"throughput_per_s"`
}

// Point is one second of one operation on the timeline.
type Point struct {
	Count int64   `json:"n"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// Outcomes is set only for outcomes other than "ok".
	Outcomes map[string]int64 `json:"outcomes,omitempty"`
}

// Second is one entry of the timeline: seconds since the start and the
// operations completed during that second.
type Second struct {
	T   int              `json:"t"`
	Ops map[string]Point `json:"ops"`
}

type opRec struct {
	total    *hdr.Histogram
	window   *hdr.Histogram
	outcomes map[string]int64
	winOut   map[string]int64
}

// Recorder collects latencies and outcomes from many goroutines.
type Recorder struct {
	mu       sync.Mutex
	start    time.Time
	ops      map[string]*opRec
	timeline []Second
	// maxTimeline bounds the per-second timeline (a multi-hour soak keeps
	// its last maxTimeline seconds; totals are never dropped).
	maxTimeline int
}

// NewRecorder returns an empty recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), ops: map[string]*opRec{}, maxTimeline: 6 * 3600}
}

// Start is when the recorder's clock started.
func (r *Recorder) Start() time.Time { return r.start }

// Record adds one completed operation.
func (r *Recorder) Record(op string, latency time.Duration, outcome string) {
	us := latency.Microseconds()
	if us < minMicros {
		us = minMicros
	}
	if us > maxMicros {
		us = maxMicros
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.ops[op]
	if o == nil {
		o = &opRec{total: newHist(), window: newHist(), outcomes: map[string]int64{}, winOut: map[string]int64{}}
		r.ops[op] = o
	}
	_ = o.total.RecordValue(us)
	_ = o.window.RecordValue(us)
	o.outcomes[outcome]++
	if outcome != "ok" {
		o.winOut[outcome]++
	}
}

// Tick closes the current one-second window and appends it to the timeline.
// The engine calls it once a second.
func (r *Recorder) Tick(now time.Time) Second {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Second{T: int(now.Sub(r.start).Round(time.Second) / time.Second), Ops: map[string]Point{}}
	for name, o := range r.ops {
		if o.window.TotalCount() == 0 {
			continue
		}
		p := Point{Count: o.window.TotalCount(), P50Ms: ms(o.window.ValueAtQuantile(50)), P99Ms: ms(o.window.ValueAtQuantile(99))}
		if len(o.winOut) > 0 {
			p.Outcomes = o.winOut
			o.winOut = map[string]int64{}
		}
		s.Ops[name] = p
		o.window.Reset()
	}
	r.timeline = append(r.timeline, s)
	if len(r.timeline) > r.maxTimeline {
		r.timeline = r.timeline[len(r.timeline)-r.maxTimeline:]
	}
	return s
}

// Ops returns per-operation statistics; elapsed is the measured duration
// used for throughput.
func (r *Recorder) Ops(elapsed time.Duration) map[string]OpStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]OpStats{}
	for name, o := range r.ops {
		st := OpStats{Summary: summarize(o.total), Outcomes: map[string]int64{}}
		for k, v := range o.outcomes {
			st.Outcomes[k] = v
		}
		if elapsed > 0 {
			st.Throughput = float64(st.Count) / elapsed.Seconds()
		}
		out[name] = st
	}
	return out
}

// Timeline returns the per-second timeline recorded so far.
func (r *Recorder) Timeline() []Second {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Second(nil), r.timeline...)
}

// OpNames returns the recorded operation names, sorted.
func (r *Recorder) OpNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.ops))
	for n := range r.ops {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
