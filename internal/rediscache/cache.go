// Package rediscache is the regional read cache of the booking service: it
// keeps public reads (availability calendars, slot lists, search pages) in the
// region's Redis for a short TTL, collapses concurrent misses of one key into
// one database read, drops a partition's entries when an event says it
// changed, and steps out of the way — never failing a read — when Redis is
// slow or down.
//
// # Keys and invalidation
//
// Every partition (a hotel, a clinic, a searched city) has a generation
// number in Redis; an entry's key embeds the generation that was current
// when its fill started:
//
//	berth:<region>:{<kind>:<partition_id>}:gen            the generation
//	berth:<region>:{<kind>:<partition_id>}:<gen>:<name>   one cached read
//
// Invalidate bumps the generation (O(1), one round trip): old entries are
// simply never read again and expire on their TTL. We chose this over a
// per-partition set of keys to DEL because it also closes the classic
// fill/invalidate race: a fill that read the database before a write
// committed but stores after the invalidation lands under the old
// generation, where no reader looks. A key set would let that stale fill
// live for a whole TTL. The hash tag {kind:partition} keeps a partition's
// keys in one slot, so the read script is valid on Redis Cluster too.
//
// Bounded staleness does not depend on invalidation: every entry has a TTL
// (BERTH_CACHE_TTL, 30 s by default), so a lost event or a Redis blip during
// invalidation costs at most one TTL. A stale read never feeds a write:
// writes decide in the database.
package rediscache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"golang.org/x/sync/singleflight"
)

// Options configure a Cache. Zero values take the defaults.
type Options struct {
	// Region prefixes every key so regions sharing a Redis never mix.
	Region string
	// TTL of an entry (default 30 s): the staleness bound when an
	// invalidation is lost.
	TTL time.Duration
	// Timeout bounds every Redis call (default 50 ms).
	Timeout time.Duration
	// LoadTimeout bounds a database load shared by collapsed callers
	// (default 10 s); it does not end when the first caller goes away.
	LoadTimeout time.Duration
	// FailureThreshold consecutive Redis failures open the breaker (default 5).
	FailureThreshold int
	// Cooldown is how long the breaker stays open before a probe (default 1 s).
	Cooldown time.Duration
	// ReadLag is how far behind the primary a miss's database read may be
	// (CockroachDB follower reads: about 5 s; 0 for reads of the primary).
	// An entry filled within ReadLag of its partition's last invalidation
	// may predate that write, so it is kept only until ReadLag after the
	// invalidation; the next fill then reads past the write.
	ReadLag time.Duration
	// EventLinger is how long a bump round started by an event's
	// invalidation (Events) waits for more before it is sent (default 5 ms;
	// negative: not at all). The event consumers see every event of every
	// region, arriving in bursts (a relay round, fanned out to the
	// consumer's workers), and one round per burst instead of one per event
	// or two halves the round trips (docs/PERFORMANCE.md, "CPU per hold").
	// A write's own invalidation (Invalidate) never lingers: it sends at
	// once, and takes along a lingering round's partitions.
	EventLinger time.Duration
	// PoolSize of the Redis client (default 10 per CPU, go-redis's default).
	PoolSize int
	Logger   *slog.Logger
	// Now is the breaker's clock (tests may replace it).
	Now func() time.Time
}

// Cache is a regional read-through cache over Redis. It is safe for
// concurrent use.
type Cache struct {
	rdb    *redis.Client
	opts   Options
	log    *slog.Logger
	flight singleflight.Group
	br     *breaker

	// Invalidations waiting for the next bump round trip, by generation
	// key (see Invalidate).
	bumpMu    sync.Mutex
	bumpQueue map[string][]chan error
	// bumpWrite says whether a write's own invalidation (Invalidate) is
	// in bumpQueue; a round without one was sent for events alone.
	bumpWrite bool
	// sending: a round is in flight (sent by the bumper or by a write's
	// call); at most one is. bumping: the bumper has a run going on.
	sending, bumping bool
	// bumpNow cuts a lingering round's wait short (an Invalidate that
	// must not wait).
	bumpNow chan struct{}
	// bumpStart wakes the bumper, one long-lived goroutine, with the
	// linger of the run of rounds to begin; at most one start is pending
	// (it is sent only when no run is going on, under bumpMu). A goroutine
	// per run grew its stack through the Redis client's calls on every
	// round: a few per cent of a booking service's CPU under holds, one
	// run per hold (docs/PERFORMANCE.md, "The bump rounds' goroutine").
	bumpStart  chan time.Duration
	bumperOnce sync.Once
	closeOnce  sync.Once
	closed     chan struct{}

	hits, misses, loads, errs, bypassed, invalidations, invalidateErrs, bumpRounds atomic.Int64
	eventInvalidations, eventRounds, bumpKeys                                      atomic.Int64
}

// Stats are the cache's counters since start, for metrics.
type Stats struct {
	Hits          int64 // reads answered from Redis
	Misses        int64 // reads answered by a load (Redis had no entry, failed or was bypassed)
	Loads         int64 // database loads actually run (collapsed misses count once)
	Errors        int64 // Redis calls that failed or timed out
	Bypassed      int64 // reads that skipped Redis because the breaker was open
	Invalidations int64 // invalidations that succeeded (coalesced callers count once each)
	InvalidateErr int64 // invalidations that could not reach Redis
	BumpRounds    int64 // round trips that bumped generations (one per batch of invalidations)
	// Of Invalidations, those made for events (EventInvalidator).
	EventInvalidations int64
	// Of BumpRounds, those sent with no write's own invalidation in them.
	EventRounds int64
	// BumpKeys counts the generations bumped by the rounds: one per
	// distinct partition of a round, however many callers shared it.
	BumpKeys int64
	Breaker  State
}

// New returns a cache on the Redis at url (redis://host:port/db). It does
// not connect until first use; Ping checks reachability.
func New(url string, opts Options) (*Cache, error) {
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	if opts.TTL <= 0 {
		opts.TTL = 30 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.LoadTimeout <= 0 {
		opts.LoadTimeout = 10 * time.Second
	}
	if opts.FailureThreshold <= 0 {
		opts.FailureThreshold = 5
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = time.Second
	}
	if opts.EventLinger == 0 {
		opts.EventLinger = 5 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Region == "" {
		return nil, errors.New("rediscache: region required")
	}
	// Every call is bounded by opts.Timeout and never retried: a slow Redis
	// must cost one short timeout, then the breaker takes over.
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolTimeout = opts.Timeout, opts.Timeout, opts.Timeout, opts.Timeout
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if opts.PoolSize > 0 {
		ro.PoolSize = opts.PoolSize
	}
	c := &Cache{rdb: redis.NewClient(ro), opts: opts, log: opts.Logger, bumpNow: make(chan struct{}, 1),
		bumpStart: make(chan time.Duration, 1), closed: make(chan struct{})}
	c.br = &breaker{threshold: opts.FailureThreshold, cooldown: opts.Cooldown, now: opts.Now,
		onChange: func(from, to State) {
			c.log.Warn("redis cache breaker", "from", from.String(), "to", to.String())
		}}
	return c, nil
}

// Close closes the Redis client and ends the bumper; an invalidation after
// it fails at once.
func (c *Cache) Close() error {
	// Under bumpMu, so a start sent before it is seen by the bumper's
	// last look and none is sent after it.
	c.bumpMu.Lock()
	c.closeOnce.Do(func() { close(c.closed) })
	c.bumpMu.Unlock()
	return c.rdb.Close()
}

// TTL returns the default entry TTL.
func (c *Cache) TTL() time.Duration { return c.opts.TTL }

// Ping checks that Redis answers within the timeout.
func (c *Cache) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	return c.rdb.Ping(ctx).Err()
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Loads: c.loads.Load(), Errors: c.errs.Load(),
		Bypassed: c.bypassed.Load(), Invalidations: c.invalidations.Load(), InvalidateErr: c.invalidateErrs.Load(),
		BumpRounds: c.bumpRounds.Load(), EventInvalidations: c.eventInvalidations.Load(),
		EventRounds: c.eventRounds.Load(), BumpKeys: c.bumpKeys.Load(),
		Breaker: c.br.current()}
}

// BreakerState returns the breaker's state.
func (c *Cache) BreakerState() State { return c.br.current() }

// prefix is the partition's key prefix, hash tag included.
func (c *Cache) prefix(kind, partitionID string) string {
	return "berth:" + c.opts.Region + ":{" + kind + ":" + partitionID + "}:"
}

// readScript returns the current generation, the entry under it and the
// server's clock in one round trip. A missing generation reads as "0".
var readScript = redis.NewScript(`
local g = redis.call('GET', KEYS[1]) or '0'
local t = redis.call('TIME')
return {g, redis.call('GET', ARGV[1] .. g .. ':' .. ARGV[2]), t[1] .. string.format('%06d', tonumber(t[2]))}
`)

// bumpScript moves the generation forward to the server's clock in
// microseconds (or +1 if that is not ahead), so even a generation key lost to
// eviction never comes back to a value whose entries may still live.
var bumpScript = redis.NewScript(`
local t = redis.call('TIME')
local g = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if g <= cur then g = cur + 1 end
redis.call('SET', KEYS[1], string.format('%.0f', g), 'EX', ARGV[1])
return 1
`)

// call runs one Redis operation through the breaker with the timeout. It
// reports errBypass when the breaker is open.
func (c *Cache) call(ctx context.Context, op func(ctx context.Context) error) error {
	if !c.br.allow() {
		return errBypass
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	err := op(cctx)
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		c.br.success()
		return err
	case ctx.Err() != nil:
		// The caller gave up: that says nothing about Redis.
		c.br.release()
		return err
	default:
		c.errs.Add(1)
		c.br.failure()
		return err
	}
}

var errBypass = errors.New("rediscache: breaker open")

// Fetch returns the cached bytes of (kind, partitionID, name), or runs load,
// caches its result for ttl (0: the default TTL) and returns it. hit says
// whether Redis answered. Concurrent misses of one key in this process share
// one load. Redis failures are never returned: the read falls back to load.
// load's errors are returned as they are and never cached.
func (c *Cache) Fetch(ctx context.Context, kind, partitionID, name string, ttl time.Duration,
	load func(context.Context) ([]byte, error)) (body []byte, hit bool, err error) {
	if ttl <= 0 {
		ttl = c.opts.TTL
	}
	prefix := c.prefix(kind, partitionID)
	var (
		gen, now string
		val      []byte
	)
	err = c.call(ctx, func(ctx context.Context) error {
		res, err := readScript.Run(ctx, c.rdb, []string{prefix + "gen"}, prefix, name).Slice()
		if err != nil {
			return err
		}
		if len(res) != 3 {
			return fmt.Errorf("rediscache: read script returned %d values", len(res))
		}
		gen, _ = res[0].(string)
		now, _ = res[2].(string)
		if s, ok := res[1].(string); ok {
			val = []byte(s)
		}
		return nil
	})
	if err == nil && val != nil {
		c.hits.Add(1)
		return val, true, nil
	}
	c.misses.Add(1)
	if err != nil {
		if errors.Is(err, errBypass) {
			c.bypassed.Add(1)
		}
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		// Redis is failing: load without storing, still one load per key.
		return c.load(ctx, "nocache:"+prefix+name, load, nil)
	}
	// The entry goes under the generation read *before* the load: if the
	// partition is invalidated meanwhile, this fill is dead on arrival.
	key := prefix + gen + ":" + name
	ttl = c.lagTTL(ttl, gen, now)
	return c.load(ctx, key, func(ctx context.Context) ([]byte, error) {
		// A caller whose miss raced the end of the previous flight would
		// load again: look once more before going to the database.
		var b []byte
		err := c.call(ctx, func(ctx context.Context) (err error) {
			b, err = c.rdb.Get(ctx, key).Bytes()
			return err
		})
		if err == nil {
			return b, errFilled
		}
		return load(ctx)
	}, func(ctx context.Context, b []byte) {
		_ = c.call(ctx, func(ctx context.Context) error { return c.rdb.Set(ctx, key, b, ttl).Err() })
	})
}

// errFilled tells load that the entry was found in Redis after all.
var errFilled = errors.New("rediscache: filled meanwhile")

// lagTTL shortens ttl for a fill that may read from before the partition's
// last invalidation (see Options.ReadLag). Generations and now are both
// microseconds of the Redis server's clock, so no clock skew enters.
func (c *Cache) lagTTL(ttl time.Duration, gen, now string) time.Duration {
	if c.opts.ReadLag <= 0 || gen == "0" {
		return ttl
	}
	g, err1 := strconv.ParseInt(gen, 10, 64)
	n, err2 := strconv.ParseInt(now, 10, 64)
	if err1 != nil || err2 != nil {
		return min(ttl, c.opts.ReadLag)
	}
	age := time.Duration(n-g) * time.Microsecond
	if age >= c.opts.ReadLag {
		return ttl
	}
	return max(min(ttl, c.opts.ReadLag-age), time.Millisecond)
}

// load runs fn once per flight key, stores the result with store (when not
// nil) and returns it to every waiting caller. A caller that goes away stops
// waiting; the shared load goes on for the others.
func (c *Cache) load(ctx context.Context, flightKey string, fn func(context.Context) ([]byte, error),
	store func(context.Context, []byte)) ([]byte, bool, error) {
	ch := c.flight.DoChan(flightKey, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.LoadTimeout)
		defer cancel()
		b, err := fn(lctx)
		if errors.Is(err, errFilled) {
			return b, nil
		}
		c.loads.Add(1)
		if err != nil {
			return nil, err
		}
		if store != nil {
			store(lctx, b)
		}
		return b, nil
	})
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, false, r.Err
		}
		return r.Val.([]byte), false, nil
	}
}

// Invalidate drops every cached read of a partition by bumping its
// generation. An error means Redis could not be reached: the entries then
// expire on their TTL.
//
// Concurrent invalidations are coalesced, group-commit style: a call joins
// the round trip that has not started yet (or starts one when none is
// running), and a round bumps every partition queued for it once, in one
// pipeline. A call therefore returns only after a bump of its partition
// that began after the call did — exactly what a lone bump guarantees, so
// the fill/invalidate argument above holds unchanged — while a region's
// cache consumer, which sees every event of every region, pays one Redis
// round trip per batch of events instead of one per event
// (docs/PERFORMANCE.md, "CPU per hold").
//
// A write's call sends its round itself, on its own goroutine, when no
// round is in flight — taking along the events' calls that linger for one
// — and waits for the bumper only behind a round in flight: nearly every
// hold's invalidation is such a round of its own, and the hand-off to the
// bumper and back (two goroutine wake-ups) cost about as much CPU as the
// round trip (docs/adr/0026-invalidation-rounds.md).
func (c *Cache) Invalidate(ctx context.Context, kind, partitionID string) error {
	return c.invalidate(ctx, kind, partitionID, 0, false)
}

// invalidate is Invalidate; a call with linger > 0 (an event's) waits up to
// linger for company before its round is sent. A round's bump still begins
// after every call in it, lingering or not, so the guarantee above is the
// same. event says the call is an event's (for Stats).
func (c *Cache) invalidate(ctx context.Context, kind, partitionID string, linger time.Duration, event bool) error {
	key := c.prefix(kind, partitionID) + "gen"
	done := make(chan error, 1)
	c.bumpMu.Lock()
	select {
	case <-c.closed:
		c.bumpMu.Unlock()
		c.invalidateErrs.Add(1)
		return fmt.Errorf("invalidate %s %s: %w: %w", kind, partitionID, berth.ErrDependency, redis.ErrClosed)
	default:
	}
	if c.bumpQueue == nil {
		c.bumpQueue = map[string][]chan error{}
	}
	c.bumpQueue[key] = append(c.bumpQueue[key], done)
	write := linger <= 0
	c.bumpWrite = c.bumpWrite || write
	switch {
	case write && !c.sending:
		// Send the queue now, here; the lingering run, if any, finds it
		// gone (or finds what came since) when its linger ends.
		c.sendRound()
		c.finishRound()
		c.bumpMu.Unlock()
	case c.sending:
		// The round in flight's end hands the queue on (finishRound).
		if write && c.bumping {
			c.wakeBumper()
		}
		c.bumpMu.Unlock()
	case !c.bumping:
		c.startBumper(linger)
		c.bumpMu.Unlock()
	default:
		c.bumpMu.Unlock() // a run lingers for company: this call is some
	}
	var err error
	select {
	case err = <-done: // a write's own round has answered already
	default:
		select {
		case err = <-done:
		case <-ctx.Done():
			// The round goes on without us; the caller retries.
			err = ctx.Err()
		}
	}
	if err != nil {
		c.invalidateErrs.Add(1)
		// Whatever went wrong (a timeout, a refused connection, the breaker
		// open, a saturated pool), it was Redis: the event consumer retries
		// the event while it lasts instead of dead-lettering it.
		return fmt.Errorf("invalidate %s %s: %w: %w", kind, partitionID, berth.ErrDependency, err)
	}
	c.invalidations.Add(1)
	if event {
		c.eventInvalidations.Add(1)
	}
	return nil
}

// startBumper starts a run of rounds on the bumper that first waits linger.
// Under bumpMu, with no run going on.
func (c *Cache) startBumper(linger time.Duration) {
	c.bumping = true
	c.bumperOnce.Do(func() { go c.bumper() })
	c.bumpStart <- linger // never blocks: the bumper is idle and took the last start
}

// wakeBumper cuts a lingering run's wait short. Under bumpMu.
func (c *Cache) wakeBumper() {
	select {
	case c.bumpNow <- struct{}{}:
	default:
	}
}

// sendRound sends the queued invalidations as one round and answers every
// caller in it. It is called under bumpMu with no round in flight, releases
// bumpMu while the round is in flight and returns holding it again.
func (c *Cache) sendRound() {
	round, write := c.bumpQueue, c.bumpWrite
	c.bumpQueue, c.bumpWrite, c.sending = nil, false, true
	c.bumpMu.Unlock()
	c.bumpRounds.Add(1)
	c.bumpKeys.Add(int64(len(round)))
	if !write {
		c.eventRounds.Add(1)
	}
	errs := c.bump(round)
	for key, waiters := range round {
		for _, w := range waiters {
			w <- errs[key]
		}
	}
	c.bumpMu.Lock()
	c.sending = false
}

// finishRound hands on what was queued while a round sent by a write's
// call was in flight: to the bumper, so that the write returns after one
// round trip. Under bumpMu.
func (c *Cache) finishRound() {
	switch {
	case len(c.bumpQueue) == 0:
	case c.bumping:
		// A run lingers: it takes the queue when its linger ends, at
		// once if a write waits in it.
		if c.bumpWrite {
			c.wakeBumper()
		}
	default:
		select {
		case <-c.closed:
			// The bumper may be gone: the calls get the closed client's
			// error from a round of their own (it fails at once).
			c.sendRound()
			c.finishRound()
			return
		default:
		}
		linger := time.Duration(0)
		if !c.bumpWrite {
			linger = max(c.opts.EventLinger, 0)
		}
		c.startBumper(linger)
	}
}

// bumper runs each run of bump rounds as it is started, until Close. A run
// started before Close still runs (its rounds then fail on the closed
// client), so no caller is left waiting.
func (c *Cache) bumper() {
	for {
		select {
		case linger := <-c.bumpStart:
			c.runBumps(linger)
		case <-c.closed:
			select {
			case linger := <-c.bumpStart:
				c.runBumps(linger)
			default:
			}
			return
		}
	}
}

// runBumps runs bump rounds until no invalidation waits; the first waits
// linger (or until a write's call that must not wait comes, or Close) for
// more. A write's call may have sent the queue meanwhile (Invalidate): the
// run then sends what came since, or ends. Behind a write's round in
// flight, the run ends and that round's end starts the next.
func (c *Cache) runBumps(linger time.Duration) {
	if linger > 0 {
		t := time.NewTimer(linger)
		select {
		case <-t.C:
		case <-c.bumpNow:
			t.Stop()
		case <-c.closed:
			t.Stop()
		}
	}
	c.bumpMu.Lock()
	for len(c.bumpQueue) > 0 && !c.sending {
		c.sendRound()
	}
	c.bumping = false
	// A wake-up meant for this run must not cut the next one's linger
	// short.
	select {
	case <-c.bumpNow:
	default:
	}
	c.bumpMu.Unlock()
}

// bump moves the generation of every key of round forward in one pipeline
// (one call through the breaker) and returns the keys that failed.
func (c *Cache) bump(round map[string][]chan error) map[string]error {
	genTTL := strconv.FormatInt(int64(max(24*time.Hour, 10*c.opts.TTL)/time.Second), 10)
	failed := map[string]error{}
	err := c.call(context.Background(), func(ctx context.Context) error {
		cmds := make(map[string]*redis.Cmd, len(round))
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for key := range round {
				cmds[key] = bumpScript.EvalSha(ctx, p, []string{key}, genTTL)
			}
			return nil
		})
		if err == nil {
			return nil
		}
		// A Redis that lost its script cache (a restart) answers NOSCRIPT:
		// send those with the script's text, which also loads it.
		var retry []string
		for key, cmd := range cmds {
			if cerr := cmd.Err(); cerr != nil && redis.HasErrorPrefix(cerr, "NOSCRIPT") {
				retry = append(retry, key)
			} else if cerr != nil {
				failed[key] = cerr
			}
		}
		if len(retry) == 0 {
			return err
		}
		_, err = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, key := range retry {
				cmds[key] = bumpScript.Eval(ctx, p, []string{key}, genTTL)
			}
			return nil
		})
		for _, key := range retry {
			if cerr := cmds[key].Err(); cerr != nil {
				failed[key] = cerr
			}
		}
		return err
	})
	if err != nil {
		for key := range round {
			if failed[key] == nil {
				failed[key] = err
			}
		}
	}
	return failed
}

// Events adapts the cache to the event consumer's invalidator (natsbus):
// every event of a partition invalidates it, whatever its type.
func (c *Cache) Events() EventInvalidator { return EventInvalidator{c: c} }

// EventInvalidator invalidates the partition named by each event.
type EventInvalidator struct{ c *Cache }

// Invalidate drops the cached reads of the event's partition. An unreachable
// Redis is reported so the consumer redelivers; the TTL bounds the rest.
func (e EventInvalidator) Invalidate(ctx context.Context, kind, partitionID, _ string, _ []byte) error {
	if kind == "" || partitionID == "" || strings.ContainsAny(kind+partitionID, "{}") {
		return nil
	}
	return e.c.invalidate(ctx, kind, partitionID, max(e.c.opts.EventLinger, 0), true)
}
