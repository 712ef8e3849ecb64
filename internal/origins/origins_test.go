package origins

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/berthhq/berth/internal/rediscache/redistest"
)

func sum(counts []placement.OriginCount, id string) int64 {
	var n int64
	for _, c := range counts {
		if c.PartitionID == id {
			n += c.Writes
		}
	}
	return n
}

// Two router replicas of one region add to one tally; another region keeps
// its own; a window leaves older buckets out; a Redis outage fails the
// flush (the counts are dropped), never the caller of Count.
func TestCountsAreSharedByReplicasAndWindowed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb, err := ratelimit.NewClient(srv.URL(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	now := time.Now()
	a, b := NewCounter(rdb, "eu-west", time.Hour), NewCounter(rdb, "eu-west", time.Hour)
	us := NewCounter(rdb, "us-east", time.Hour)
	old := NewCounter(rdb, "eu-west", time.Hour)
	old.now = func() time.Time { return now.Add(-30 * time.Minute) }
	for range 3 {
		a.Count(berth.KindHotel, "h1")
	}
	b.Count(berth.KindHotel, "h1")
	b.Count(berth.KindClinic, "c1")
	us.Count(berth.KindHotel, "h1")
	old.Count(berth.KindHotel, "h1")
	for _, c := range []*Counter{a, b, us, old} {
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	eu, err := Read(ctx, rdb, "eu-west", 10*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(eu, "h1"); got != 4 {
		t.Errorf("eu-west writes of h1 in 10 min: %d, want 4 (%+v)", got, eu)
	}
	if got := sum(eu, "c1"); got != 1 {
		t.Errorf("eu-west writes of c1: %d, want 1", got)
	}
	for _, c := range eu {
		if c.Origin != "eu-west" || (c.PartitionID == "c1") != (c.Kind == berth.KindClinic) {
			t.Errorf("count %+v", c)
		}
	}
	if all, _ := Read(ctx, rdb, "eu-west", time.Hour, now); sum(all, "h1") != 5 {
		t.Errorf("eu-west writes of h1 in an hour: %d, want 5", sum(all, "h1"))
	}
	if east, _ := Read(ctx, rdb, "us-east", 10*time.Minute, now); sum(east, "h1") != 1 {
		t.Errorf("us-east writes of h1: %+v", east)
	}
	// A flush with nothing counted is free; counting again adds up.
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	a.Count(berth.KindHotel, "h1") // never blocks, never fails
	fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := a.Flush(fctx); err == nil {
		t.Fatal("a flush with Redis down reported success")
	}
	if flushed, failed := a.Stats(); flushed != 1 || failed != 1 {
		t.Errorf("stats: %d flushed, %d failed", flushed, failed)
	}
}
