package rediscache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/rediscache/redistest"
	"github.com/redis/go-redis/v9"
)

func newCache(t *testing.T, url string, opts rediscache.Options) *rediscache.Cache {
	t.Helper()
	if opts.Region == "" {
		opts.Region = "test"
	}
	if opts.Timeout == 0 {
		// Generous: these tests check behaviour, not speed, and run many
		// redis-servers at once under the race detector.
		opts.Timeout = 2 * time.Second
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := rediscache.New(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// loader returns a load func that counts its calls and answers value().
func loader(calls *atomic.Int64, value func() string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		calls.Add(1)
		return []byte(value()), nil
	}
}

func TestFetchMissThenHit(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{})
	ctx := context.Background()
	var calls atomic.Int64
	load := loader(&calls, func() string { return "v1" })
	b, hit, err := c.Fetch(ctx, "hotel", "h1", "avail:a", 0, load)
	if err != nil || hit || string(b) != "v1" {
		t.Fatalf("first fetch: %q hit=%v err=%v", b, hit, err)
	}
	b, hit, err = c.Fetch(ctx, "hotel", "h1", "avail:a", 0, load)
	if err != nil || !hit || string(b) != "v1" {
		t.Fatalf("second fetch: %q hit=%v err=%v", b, hit, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("loads = %d, want 1", calls.Load())
	}
	// Load errors reach the caller and are not cached.
	boom := errors.New("boom")
	if _, _, err := c.Fetch(ctx, "hotel", "h1", "avail:b", 0, func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("load error: got %v", err)
	}
	if _, hit, _ := c.Fetch(ctx, "hotel", "h1", "avail:b", 0, load); hit {
		t.Fatal("a failed load was cached")
	}
	if s := c.Stats(); s.Hits != 1 || s.Breaker != rediscache.Closed {
		t.Fatalf("stats: %+v", s)
	}
}

func TestConcurrentMissesShareOneLoad(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{})
	const callers = 64
	var (
		calls   atomic.Int64
		started sync.WaitGroup
		release = make(chan struct{})
	)
	started.Add(callers)
	load := func(context.Context) ([]byte, error) {
		calls.Add(1)
		<-release // hold the load open until every caller has asked
		return []byte("v"), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			started.Done()
			b, _, err := c.Fetch(context.Background(), "hotel", "hot", "avail:x", 0, load)
			if err == nil && string(b) != "v" {
				err = fmt.Errorf("got %q", b)
			}
			errs <- err
		})
	}
	started.Wait()
	// The barrier: every caller has looked in Redis and missed. The one load
	// is still held open, so each of them missed while the flight was in the
	// air and joins it (or, arriving a hair late, finds the flight's entry in
	// Redis before loading) — never a second load. Then let the load finish.
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Misses < callers {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d callers missed within 10 s (%+v)", c.Stats().Misses, callers, c.Stats())
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// All callers missed concurrently; one load served them all.
	if st := c.Stats(); st.Hits != 0 || st.Loads != 1 {
		t.Fatalf("stats %+v: want %d misses sharing 1 load and no hit", st, callers)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("loads = %d, want 1 for %d concurrent callers (%+v)", n, callers, c.Stats())
	}
}

func TestInvalidateDropsOnlyThatPartition(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{})
	ctx := context.Background()
	var version atomic.Int64
	var calls atomic.Int64
	load := loader(&calls, func() string { return fmt.Sprint("v", version.Load()) })
	for _, p := range []string{"a", "b"} {
		for _, n := range []string{"x", "y"} {
			if _, _, err := c.Fetch(ctx, "hotel", p, n, 0, load); err != nil {
				t.Fatal(err)
			}
		}
	}
	version.Store(1)
	if err := c.Invalidate(ctx, "hotel", "a"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"x", "y"} {
		b, hit, _ := c.Fetch(ctx, "hotel", "a", n, 0, load)
		if hit || string(b) != "v1" {
			t.Fatalf("a/%s after invalidate: %q hit=%v", n, b, hit)
		}
		b, hit, _ = c.Fetch(ctx, "hotel", "b", n, 0, load)
		if !hit || string(b) != "v0" {
			t.Fatalf("b/%s untouched partition: %q hit=%v", n, b, hit)
		}
	}
	// Same id, other kind: its own partition.
	if _, hit, _ := c.Fetch(ctx, "clinic", "b", "x", 0, load); hit {
		t.Fatal("kinds share a partition")
	}
}

// A fill that read the database before a write committed and stores after
// the write's invalidation must never be served: it lands under the old
// generation.
func TestFillRacingInvalidationIsNeverServed(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{})
	ctx := context.Background()
	var current atomic.Value
	current.Store("old")
	slow := func(ctx context.Context) ([]byte, error) {
		v := current.Load().(string) // the read, before the write commits
		current.Store("new")         // the write commits ...
		if err := c.Invalidate(ctx, "hotel", "h"); err != nil {
			return nil, err // ... and is invalidated, before this fill stores
		}
		return []byte(v), nil
	}
	if b, _, err := c.Fetch(ctx, "hotel", "h", "k", 0, slow); err != nil || string(b) != "old" {
		t.Fatalf("racing fill: %q %v", b, err)
	}
	var calls atomic.Int64
	b, hit, err := c.Fetch(ctx, "hotel", "h", "k", 0, loader(&calls, func() string { return current.Load().(string) }))
	if err != nil || hit || string(b) != "new" {
		t.Fatalf("after the race: %q hit=%v err=%v (the stale fill was served)", b, hit, err)
	}
}

func TestEntriesExpireOnTTL(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{TTL: 200 * time.Millisecond})
	ctx := context.Background()
	var calls atomic.Int64
	load := loader(&calls, func() string { return "v" })
	if _, _, err := c.Fetch(ctx, "hotel", "h", "k", 0, load); err != nil {
		t.Fatal(err)
	}
	// Bounded wait for Redis to expire the entry (no timing assertion).
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, hit, err := c.Fetch(ctx, "hotel", "h", "k", 0, load)
		if err != nil {
			t.Fatal(err)
		}
		if !hit {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("entry never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With Redis down every read still answers (from the loader), the breaker
// opens so later reads skip Redis, and once Redis is back hits resume.
func TestRedisDownFallsBackAndRecovers(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{Timeout: 50 * time.Millisecond, FailureThreshold: 3, Cooldown: 100 * time.Millisecond})
	ctx := context.Background()
	var calls atomic.Int64
	load := loader(&calls, func() string { return "db" })
	if _, _, err := c.Fetch(ctx, "hotel", "h", "k", 0, load); err != nil {
		t.Fatal(err)
	}
	rs.Stop()
	const reads = 50
	for i := range reads {
		b, hit, err := c.Fetch(ctx, "hotel", "h", "k", 0, load)
		if err != nil || hit || string(b) != "db" {
			t.Fatalf("read %d with Redis down: %q hit=%v err=%v", i, b, hit, err)
		}
	}
	s := c.Stats()
	if s.Breaker == rediscache.Closed {
		t.Fatalf("breaker still closed after %d failed reads: %+v", reads, s)
	}
	if s.Bypassed == 0 {
		t.Fatalf("no read skipped Redis: %+v", s)
	}
	t.Logf("Redis down: %d reads, %d Redis errors paid, %d bypassed, breaker %s", reads, s.Errors, s.Bypassed, s.Breaker)
	if err := c.Invalidate(ctx, "hotel", "h"); err == nil {
		t.Fatal("invalidate with Redis down reported success")
	}

	rs.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, hit, err := c.Fetch(ctx, "hotel", "h", "k", 0, load)
		if err != nil {
			t.Fatal(err)
		}
		if hit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no hit within 10s of Redis coming back: %+v", c.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := c.Stats(); s.Breaker != rediscache.Closed {
		t.Fatalf("breaker %s after recovery", s.Breaker)
	}
}

func TestEventInvalidator(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{})
	ctx := context.Background()
	var calls atomic.Int64
	load := loader(&calls, func() string { return "v" })
	_, _, _ = c.Fetch(ctx, "clinic", "c1", "slots:d:2030-01-01", 0, load)
	if err := c.Events().Invalidate(ctx, "clinic", "c1", "appointment.held", nil); err != nil {
		t.Fatal(err)
	}
	if _, hit, _ := c.Fetch(ctx, "clinic", "c1", "slots:d:2030-01-01", 0, load); hit {
		t.Fatal("event did not invalidate")
	}
}

// With lagging miss reads (follower reads), a fill right after an
// invalidation is kept only until ReadLag after it, then re-read.
func TestReadLagShortensFillsAfterInvalidation(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{ReadLag: 300 * time.Millisecond, TTL: time.Hour})
	ctx := context.Background()
	var calls atomic.Int64
	load := loader(&calls, func() string { return "v" })
	if err := c.Invalidate(ctx, "hotel", "h"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Fetch(ctx, "hotel", "h", "k", 0, load); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, hit, err := c.Fetch(ctx, "hotel", "h", "k", 0, load)
		if err != nil {
			t.Fatal(err)
		}
		if !hit {
			break // re-read after the lag window, despite a one-hour TTL
		}
		if time.Now().After(deadline) {
			t.Fatal("a fill within ReadLag of an invalidation kept the full TTL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Now outside the window: the fill keeps the full TTL.
	if _, hit, _ := c.Fetch(ctx, "hotel", "h", "k", 0, load); !hit {
		t.Fatal("fill outside the lag window was not kept")
	}
}

// Concurrent invalidations are coalesced into shared round trips, yet each
// returns only after a bump of its own partition that began after the call:
// an entry filled before the call is never served after it returns. Half
// the callers are writes (each sends its round itself when none is in
// flight), half events (lingering for company, sent by the bumper or taken
// along by a write's round), so every way a call reaches Redis races the
// others.
func TestConcurrentInvalidationsEachDropTheirFills(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{EventLinger: 2 * time.Millisecond})
	ctx := context.Background()
	const callers, partitions, rounds = 32, 4, 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			p, name := fmt.Sprint("p", i%partitions), fmt.Sprint("n", i)
			for r := range rounds {
				var calls atomic.Int64
				before := fmt.Sprint("v", r)
				if b, _, err := c.Fetch(ctx, "hotel", p, name, 0, loader(&calls, func() string { return before })); err != nil {
					errs <- err
					return
				} else if string(b) != before && r > 0 {
					errs <- fmt.Errorf("%s/%s round %d: served %q, want %q (an entry outlived its invalidation)", p, name, r, b, before)
					return
				}
				invalidate := func() error { return c.Invalidate(ctx, "hotel", p) }
				if i%2 == 1 {
					invalidate = func() error { return c.Events().Invalidate(ctx, "hotel", p, "reservation.held", nil) }
				}
				if err := invalidate(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Invalidations != callers*rounds || s.EventInvalidations != callers*rounds/2 {
		t.Fatalf("invalidations counted %d (%d of events), want one per call (%d, half of events)",
			s.Invalidations, s.EventInvalidations, callers*rounds)
	}
}

// A Redis that lost its scripts (a restart, SCRIPT FLUSH) still gets its
// bumps: the pipeline sends the script's text for those.
func TestInvalidateAfterScriptFlush(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{})
	ctx := context.Background()
	var calls atomic.Int64
	load := loader(&calls, func() string { return "v" })
	for range 2 {
		_, _, _ = c.Fetch(ctx, "hotel", "h", "k", 0, load)
		if err := c.Invalidate(ctx, "hotel", "h"); err != nil {
			t.Fatal(err)
		}
		ro, err := redis.ParseURL(rs.URL())
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(ro)
		err = rdb.ScriptFlush(ctx).Err()
		rdb.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, hit, _ := c.Fetch(ctx, "hotel", "h", "k", 0, load); hit {
		t.Fatal("the invalidation after SCRIPT FLUSH did not drop the entry")
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d loads, want 3 (each fill dropped by its invalidation)", n)
	}
}

// A call never joins a round already sent: its partition's bump could have
// run before the write the call is for. Redis is paused while the first
// round is in flight; a second call for the same partition must get a
// round (a bump) of its own.
func TestInvalidateNeverJoinsASentRound(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{})
	ctx := context.Background()
	if err := c.Invalidate(ctx, "hotel", "h"); err != nil { // loads the script
		t.Fatal(err)
	}
	ro, err := redis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(ro)
	defer admin.Close()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "400", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- c.Invalidate(ctx, "hotel", "h") }()
	time.Sleep(100 * time.Millisecond) // the first round is sent and waits on the pause
	if err := c.Invalidate(ctx, "hotel", "h"); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "cmdstat_evalsha:calls=2,") {
		t.Fatalf("want two bumps (one per round), commandstats:\n%s", info)
	}
}

// Events' invalidations linger for company: a burst of them shares one
// round trip. A write's own invalidation never waits for the linger: it
// sends the lingering round at once, and every call returns after a bump of
// its partition (a fill made before the call is dropped). The linger here
// is an hour, so a call that waited for it would never return.
func TestEventInvalidationsLingerWritesDoNot(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{EventLinger: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 20
	pid := func(i int) string { return fmt.Sprintf("p%02d", i) }
	fill := func(i int, v string) (string, bool) {
		b, hit, err := c.Fetch(ctx, "hotel", pid(i), "availability", time.Minute,
			func(context.Context) ([]byte, error) { return []byte(v), nil })
		if err != nil {
			t.Fatal(err)
		}
		return string(b), hit
	}
	for i := range n + 1 {
		fill(i, "before")
	}
	rounds := c.Stats().BumpRounds
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- c.Events().Invalidate(ctx, "hotel", pid(i), "reservation.held", nil) }()
	}
	// Wait until every event call is queued in the lingering round.
	for rediscache.Queued(c) < n {
		select {
		case <-ctx.Done():
			t.Fatal("the event invalidations never queued")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := c.Invalidate(ctx, "hotel", pid(n)); err != nil {
		t.Fatalf("a write's invalidation: %v", err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("an event's invalidation: %v", err)
		}
	}
	if got := c.Stats().BumpRounds - rounds; got != 1 {
		t.Errorf("%d round trips for %d event invalidations and a write's, want 1", got, n)
	}
	for i := range n + 1 {
		if v, hit := fill(i, "after"); hit || v != "after" {
			t.Errorf("partition %d: the fill made before the invalidation is still cached", i)
		}
	}
}

// A write's call sends its round itself when none is in flight; behind one
// in flight it waits for the next, which that round's end hands on at once
// — never to a run lingering for events. The linger here is an hour: a
// write left to it would wait until the test's deadline. An event's call
// queued after a write took its run's queue is still sent by that run when
// its linger ends (a shorter one in the second part), not lost.
func TestWriteBehindARoundInFlightIsSentAfterIt(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{EventLinger: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fill := func(c *rediscache.Cache, p, v string) (string, bool) {
		b, hit, err := c.Fetch(ctx, "hotel", p, "availability", time.Minute,
			func(context.Context) ([]byte, error) { return []byte(v), nil })
		if err != nil {
			t.Fatal(err)
		}
		return string(b), hit
	}
	queued := func(c *rediscache.Cache, n int) {
		for rediscache.Queued(c) < n {
			select {
			case <-ctx.Done():
				t.Fatal("the invalidations never queued")
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	for _, p := range []string{"e", "w1", "w2"} {
		fill(c, p, "before")
	}
	if err := c.Invalidate(ctx, "hotel", "x"); err != nil { // loads the script
		t.Fatal(err)
	}
	rounds := c.Stats().BumpRounds
	event := make(chan error, 1)
	go func() { event <- c.Events().Invalidate(ctx, "hotel", "e", "reservation.held", nil) }()
	queued(c, 1) // a run lingers for an hour
	ro, err := redis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(ro)
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "400", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- c.Invalidate(ctx, "hotel", "w1") }() // takes "e" along
	time.Sleep(100 * time.Millisecond)                        // its round is sent and waits on the pause
	if err := c.Invalidate(ctx, "hotel", "w2"); err != nil {
		t.Fatalf("a write behind a round in flight: %v", err)
	}
	for _, ch := range []chan error{first, event} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Stats().BumpRounds - rounds; got != 2 {
		t.Errorf("%d round trips, want 2 (the first write's with the event's, then the second write's)", got)
	}
	for _, p := range []string{"e", "w1", "w2"} {
		if v, hit := fill(c, p, "after"); hit || v != "after" {
			t.Errorf("partition %s: the fill made before its invalidation is still cached", p)
		}
	}

	// A run that lost its queue to a write goes on lingering, and sends
	// the event that came after the write's round.
	c2 := newCache(t, rs.URL(), rediscache.Options{Region: "test2", EventLinger: 300 * time.Millisecond})
	for _, p := range []string{"e1", "e2", "w"} {
		fill(c2, p, "before")
	}
	errs := make(chan error, 2)
	go func() { errs <- c2.Events().Invalidate(ctx, "hotel", "e1", "reservation.held", nil) }()
	queued(c2, 1)
	if err := c2.Invalidate(ctx, "hotel", "w"); err != nil { // sends e1's too
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	go func() { errs <- c2.Events().Invalidate(ctx, "hotel", "e2", "reservation.held", nil) }()
	if err := <-errs; err != nil {
		t.Fatalf("an event after a write took the lingering run's queue: %v", err)
	}
	if s := c2.Stats(); s.BumpRounds != 2 || s.EventRounds != 1 {
		t.Errorf("%d rounds, %d for events alone; want the write's and then the lingering run's", s.BumpRounds, s.EventRounds)
	}
	for _, p := range []string{"e1", "e2", "w"} {
		if v, hit := fill(c2, p, "after"); hit || v != "after" {
			t.Errorf("partition %s: the fill made before its invalidation is still cached", p)
		}
	}
}

// One long-lived bumper runs every round: many runs one after another each
// answer their caller after a bump, and Close answers every caller — the
// ones whose run it interrupts with the closed client's error, the ones
// after it at once — instead of leaving any waiting on a bumper that has
// ended. Every failure wraps berth.ErrDependency (the consumer retries it).
func TestBumperAnswersEveryCallerAcrossRunsAndClose(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	c := newCache(t, rs.URL(), rediscache.Options{EventLinger: 2 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fill := func(v string) (string, bool) {
		b, hit, err := c.Fetch(ctx, "hotel", "h", "availability", time.Minute,
			func(context.Context) ([]byte, error) { return []byte(v), nil })
		if err != nil {
			t.Fatal(err)
		}
		return string(b), hit
	}
	for i := range 50 {
		fill(fmt.Sprint("before ", i))
		var err error
		if i%2 == 0 {
			err = c.Invalidate(ctx, "hotel", "h")
		} else {
			err = c.Events().Invalidate(ctx, "hotel", "h", "reservation.held", nil)
		}
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if v, hit := fill(fmt.Sprint("after ", i)); hit {
			t.Fatalf("run %d: the fill made before the invalidation is still cached (%q)", i, v)
		}
	}
	if got := c.Stats().BumpRounds; got < 50 {
		t.Fatalf("%d rounds for 50 runs one after another", got)
	}
	// Callers racing Close: each returns, with nil or a dependency error.
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- c.Events().Invalidate(ctx, "hotel", fmt.Sprint("p", i), "reservation.held", nil)
		}()
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil && !errors.Is(err, berth.ErrDependency) {
			t.Fatalf("an invalidation racing Close: %v", err)
		}
	}
	if err := c.Invalidate(ctx, "hotel", "h"); !errors.Is(err, berth.ErrDependency) {
		t.Fatalf("an invalidation after Close: %v, want a dependency error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("a caller waited for its context instead of an answer")
	}
}
