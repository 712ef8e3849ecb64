package router

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/placement"
)

// metrics are the router's counters in Prometheus text format.
type metrics struct {
	mu       sync.Mutex
	requests map[classStatus]uint64
	seconds  map[string]float64 // class → total seconds

	retries, misdirected, upstreamErrors atomic.Uint64
	// misdirectedChains: requests that followed more than one 421;
	// misdirectedGaveUp: requests still misdirected at FollowMovesFor.
	misdirectedChains, misdirectedGaveUp atomic.Uint64
}

// classStatus keys the request counts: the status stays a number until
// /metrics is read, so counting formats nothing.
type classStatus struct {
	class  string
	status int
}

func newMetrics() *metrics {
	return &metrics{requests: map[classStatus]uint64{}, seconds: map[string]float64{}}
}

func (m *metrics) observe(class string, status int, d time.Duration) {
	if status == 0 {
		status = 499 // the client went away before an answer
	}
	m.mu.Lock()
	m.requests[classStatus{class, status}]++
	m.seconds[class] += d.Seconds()
	m.mu.Unlock()
}

func (m *metrics) write(w io.Writer, dir placement.Stats, writes WriteCounter) {
	m.mu.Lock()
	keys := make([]classStatus, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	// Sorted as the text was before (statuses are three digits).
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].class < keys[j].class || keys[i].class == keys[j].class && keys[i].status < keys[j].status
	})
	fmt.Fprintln(w, "# HELP berth_router_requests_total Requests by route class and status.")
	fmt.Fprintln(w, "# TYPE berth_router_requests_total counter")
	for _, k := range keys {
		fmt.Fprintf(w, "berth_router_requests_total{class=%q,status=\"%d\"} %d\n", k.class, k.status, m.requests[k])
	}
	classes := make([]string, 0, len(m.seconds))
	for c := range m.seconds {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	fmt.Fprintln(w, "# HELP berth_router_request_seconds_total Time spent answering, by route class.")
	fmt.Fprintln(w, "# TYPE berth_router_request_seconds_total counter")
	for _, c := range classes {
		fmt.Fprintf(w, "berth_router_request_seconds_total{class=%q} %g\n", c, m.seconds[c])
	}
	m.mu.Unlock()
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	counter("berth_router_upstream_retries_total", "Requests re-sent after a connection error.", m.retries.Load())
	counter("berth_router_misdirected_total", "421 answers that made the router refresh and re-send.", m.misdirected.Load())
	counter("berth_router_misdirected_chains_total", "Requests that followed more than one 421 (the partition moved again meanwhile).", m.misdirectedChains.Load())
	counter("berth_router_misdirected_gave_up_total", "Requests answered 503 because their partition kept moving for longer than the router follows it.", m.misdirectedGaveUp.Load())
	counter("berth_router_upstream_errors_total", "Requests answered 503 because a service was unreachable.", m.upstreamErrors.Load())
	counter("berth_router_directory_refreshes_total", "Single-partition look-ups in the database.", dir.Refreshes)
	counter("berth_router_directory_reloads_total", "Full directory reloads.", dir.Reloads)
	if writes != nil {
		ok, failed := writes.Stats()
		fmt.Fprintf(w, "# HELP berth_router_origin_flushes_total Saves of the write tallies by origin to Redis, by result.\n# TYPE berth_router_origin_flushes_total counter\n")
		fmt.Fprintf(w, "berth_router_origin_flushes_total{result=\"ok\"} %d\nberth_router_origin_flushes_total{result=\"failed\"} %d\n", ok, failed)
	}
	fmt.Fprintf(w, "# HELP berth_router_directory_entries Partitions in the directory cache.\n# TYPE berth_router_directory_entries gauge\nberth_router_directory_entries %d\n", dir.Entries)
}
