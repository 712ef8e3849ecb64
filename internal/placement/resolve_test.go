package placement

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
)

// gatedSource answers GetPlacement from rows once release is closed, and
// counts the calls.
type gatedSource struct {
	fakeSource
	calls   atomic.Int64
	started chan struct{} // one value per call, when it begins
	release chan struct{}
}

func (g *gatedSource) GetPlacement(ctx context.Context, kind berth.Kind, id string) (Placement, error) {
	g.calls.Add(1)
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return Placement{}, ctx.Err()
	}
	return g.fakeSource.GetPlacement(ctx, kind, id)
}

// A new hotel's first sale: many requests miss the same partition at once.
// They share one look-up, and the caller that started it hanging up fails
// only itself.
func TestConcurrentMissesShareOneLookup(t *testing.T) {
	t.Parallel()
	src := &gatedSource{
		fakeSource: fakeSource{rows: map[string]Placement{
			"h1": {Kind: berth.KindHotel, PartitionID: "h1", HomeRegion: "eu-west", Version: 3},
		}},
		started: make(chan struct{}, 100),
		release: make(chan struct{}),
	}
	d := NewDirectory(src, nil)

	// The first miss starts the look-up, then its client goes away.
	firstCtx, hangUp := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, _, err := d.Resolve(firstCtx, berth.KindHotel, "h1")
		firstErr <- err
	}()
	<-src.started

	const n = 64
	var (
		wg      sync.WaitGroup
		entered sync.WaitGroup
	)
	regions := make([]string, n)
	errs := make([]error, n)
	entered.Add(n)
	for i := range n {
		wg.Go(func() {
			entered.Done()
			var ok bool
			regions[i], ok, errs[i] = d.Resolve(context.Background(), berth.KindHotel, "h1")
			if errs[i] == nil && !ok {
				errs[i] = errors.New("not found")
			}
		})
	}
	// Every miss is on its way while the look-up is held. The pause lets
	// them reach it: a directory that looked each miss up alone would start
	// n more calls now (and fail below); one that shares passes however
	// many had arrived, since a later one finds the cache filled.
	entered.Wait()
	time.Sleep(50 * time.Millisecond)
	hangUp()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first caller after hanging up: %v, want context.Canceled", err)
	}
	close(src.release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || regions[i] != "eu-west" {
			t.Fatalf("miss %d: region %q, err %v; want eu-west", i, regions[i], errs[i])
		}
	}
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("%d look-ups for %d concurrent misses, want 1", got, n+1)
	}
	// Now cached: no look-up at all.
	if r, ok, err := d.Resolve(context.Background(), berth.KindHotel, "h1"); err != nil || !ok || r != "eu-west" {
		t.Fatalf("cached resolve: %q %v %v", r, ok, err)
	}
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("a cached partition was looked up again (%d look-ups)", got)
	}
}
