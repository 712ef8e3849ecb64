package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// Every call is counted once, as an op or a failure, and the first failure
// is kept.
func TestClosedLoopCounts(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	boom := errors.New("boom")
	c := ClosedLoop(context.Background(), 4, 50*time.Millisecond, func(context.Context, *rand.Rand) error {
		if calls.Add(1)%3 == 0 {
			return boom
		}
		time.Sleep(100 * time.Microsecond)
		return nil
	})
	if c.Ops+c.Failed != calls.Load() || c.Ops == 0 || c.Failed == 0 {
		t.Fatalf("ops %d + failed %d, calls %d", c.Ops, c.Failed, calls.Load())
	}
	if !errors.Is(c.FirstError, boom) {
		t.Errorf("first error %v", c.FirstError)
	}
	if c.P50Ms <= 0 || c.P99Ms < c.P50Ms {
		t.Errorf("latencies p50 %v p99 %v", c.P50Ms, c.P99Ms)
	}
}
