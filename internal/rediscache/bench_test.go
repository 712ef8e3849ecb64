package rediscache_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/rediscache/redistest"
)

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkInvalidateAlone is a write's own invalidation on an idle cache,
// one after another: every call is a run of its own (one bump round trip),
// as every hold's is at the rates measured in docs/PERFORMANCE.md. It
// reports the client's CPU per call (cpu-ns/op) beside the wall time, which
// is mostly the round trip's wait.
func BenchmarkInvalidateAlone(b *testing.B) {
	rs := redistest.Start(b)
	c, err := rediscache.New(rs.URL(), rediscache.Options{Region: "bench", Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Invalidate(ctx, "hotel", "h"); err != nil { // loads the script, dials
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		if err := c.Invalidate(ctx, "hotel", "h"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}
