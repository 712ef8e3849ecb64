package engine

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Closed is what ClosedLoop measured.
type Closed struct {
	Seconds      float64
	Ops, Failed  int64
	P50Ms, P99Ms float64 // of the operations that succeeded
	FirstError   error   // the first failure, for the report
}

// ClosedLoop runs op on workers goroutines, each calling it again as soon as
// it returns, until d has passed (or ctx ends). Each worker has its own
// random source. An operation that returns an error counts as failed and
// is left out of the latencies. It is the driver of the database-only
// comparisons (txcost, strategies), where the rate is whatever the
// database gives.
func ClosedLoop(ctx context.Context, workers int, d time.Duration, op func(context.Context, *rand.Rand) error) Closed {
	var (
		ops, failed atomic.Int64
		mu          sync.Mutex
		firstErr    error
		h           = hdr.New(1, 60_000_000, 3)
		wg          sync.WaitGroup
		start       = time.Now()
		end         = start.Add(d)
	)
	for range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			local := hdr.New(1, 60_000_000, 3)
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				if err := op(ctx, r); err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				ops.Add(1)
				_ = local.RecordValue(max(time.Since(t0).Microseconds(), 1))
			}
			mu.Lock()
			h.Merge(local)
			mu.Unlock()
		})
	}
	wg.Wait()
	return Closed{Seconds: time.Since(start).Seconds(), Ops: ops.Load(), Failed: failed.Load(),
		P50Ms: float64(h.ValueAtQuantile(50)) / 1000, P99Ms: float64(h.ValueAtQuantile(99)) / 1000, FirstError: firstErr}
}
