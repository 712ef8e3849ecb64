// Package origins counts every partition's writes by the region they
// entered the platform through — the region of the client's router — in
// Redis, so that all router replicas of a region add to one tally and the
// operators' balancer (`router shards balance --by-origin`) can move a
// partition's home to where its guests are. Counts are advisory: a lost
// flush only delays a move, so Redis being down never fails a request.
package origins

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/placement"
	"github.com/redis/go-redis/v9"
)

// Bucket is the granularity of the tallies: one Redis hash per region and
// minute, so a window is a whole number of buckets.
const Bucket = time.Minute

// key is the hash of one region's writes in the bucket starting at t.
func key(region string, t time.Time) string {
	return "berth:origins:" + region + ":" + strconv.FormatInt(t.Unix()/int64(Bucket/time.Second), 10)
}

// Counter tallies the writes that enter through one region's router in
// memory and adds them to Redis every flush period, one pipeline per flush
// (a write costs a map increment, not a Redis round trip).
type Counter struct {
	rdb       *redis.Client
	region    string
	retention time.Duration
	now       func() time.Time

	mu      sync.Mutex
	pending map[string]int64 // "kind/id" → writes since the last flush

	// Flushed and Failed count flushes (for /metrics and tests).
	flushed, failed uint64
}

// NewCounter returns a counter for the router of region; buckets live for
// retention (at least the longest window the balancer will ask for).
func NewCounter(rdb *redis.Client, region string, retention time.Duration) *Counter {
	if retention < Bucket {
		retention = 2 * time.Hour
	}
	return &Counter{rdb: rdb, region: region, retention: retention, now: time.Now, pending: map[string]int64{}}
}

// Count records one write of a partition.
func (c *Counter) Count(kind berth.Kind, id string) {
	c.mu.Lock()
	c.pending[string(kind)+"/"+id]++
	c.mu.Unlock()
}

// Flush adds what was counted since the last flush to the current bucket.
// On failure the counts are dropped (they are advisory) and the error
// returned.
func (c *Counter) Flush(ctx context.Context) error {
	c.mu.Lock()
	batch := c.pending
	c.pending = make(map[string]int64, len(batch))
	c.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	k := key(c.region, c.now())
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for field, n := range batch {
			p.HIncrBy(ctx, k, field, n)
		}
		p.Expire(ctx, k, c.retention+Bucket)
		return nil
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failed++
		return fmt.Errorf("flush write origins: %w", err)
	}
	c.flushed++
	return nil
}

// Run flushes every period until ctx ends, then once more.
func (c *Counter) Run(ctx context.Context, period time.Duration, onError func(error)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := c.Flush(fctx); err != nil && onError != nil {
				onError(err)
			}
			cancel()
			return
		case <-t.C:
			if err := c.Flush(ctx); err != nil && onError != nil {
				onError(err)
			}
		}
	}
}

// Stats returns how many flushes succeeded and failed.
func (c *Counter) Stats() (flushed, failed uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushed, c.failed
}

// Read sums one region's tallies over the buckets that overlap the last
// window before now: the writes that entered through that region's routers.
func Read(ctx context.Context, rdb *redis.Client, region string, window time.Duration, now time.Time) ([]placement.OriginCount, error) {
	sums := map[string]int64{}
	for t := now.Add(-window).Truncate(Bucket); !t.After(now); t = t.Add(Bucket) {
		m, err := rdb.HGetAll(ctx, key(region, t)).Result()
		if err != nil {
			return nil, fmt.Errorf("read write origins of %s: %w", region, err)
		}
		for field, v := range m {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			sums[field] += n
		}
	}
	out := make([]placement.OriginCount, 0, len(sums))
	for field, n := range sums {
		kind, id, ok := strings.Cut(field, "/")
		if !ok || !berth.Kind(kind).Valid() {
			continue
		}
		out = append(out, placement.OriginCount{Kind: berth.Kind(kind), PartitionID: id, Origin: region, Writes: n})
	}
	return out, nil
}
