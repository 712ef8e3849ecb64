// Package ratelimit owns the router's rate limits: a GCRA limiter whose state
// lives in the region's Redis, so every router replica of a region spends one
// shared budget, and the HTTP middleware that answers 429 rate_limited.
//
// Budgets are scoped (config.go): per hotel on the write path, so a flash
// sale on one hotel cannot starve the others; per client on reads and writes;
// per guest on holds. A request is checked against every scope that applies
// to it in one Lua script — one round trip, atomic, all or nothing: a request
// refused by one scope spends no budget in the others.
//
// The limiter protects the booking services; it is not a correctness fence
// (the database is). So when Redis is slow or down it fails open after a
// short timeout, counts it, logs it (at most once per cooldown) and stops
// calling Redis for a cooldown, rather than adding latency or refusing work.
package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// gcra checks every key (KEYS[i], emission interval ARGV[2i-1] µs, burst
// ARGV[2i]) and, only when all allow, advances each key's theoretical arrival
// time (TAT). Redis's own clock is used, so replicas with skewed clocks still
// agree. It returns {1, 0} when allowed, {0, wait µs} when refused.
var gcra = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tats = {}
local wait = 0
for i = 1, #KEYS do
  local em = tonumber(ARGV[2*i-1])
  local burst = tonumber(ARGV[2*i])
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  if tat < now then tat = now end
  local newtat = tat + em
  local allowAt = newtat - em * burst
  if allowAt > now and allowAt - now > wait then wait = allowAt - now end
  tats[i] = newtat
end
if wait > 0 then return {0, math.ceil(wait)} end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%.0f', tats[i]), 'PX', math.ceil((tats[i] - now) / 1000) + 1)
end
return {1, 0}
`)

// Options configure a Limiter. Zero values take the defaults.
type Options struct {
	// Prefix starts every key (default "berth:rl"); put the region in it
	// when regions share a Redis.
	Prefix string
	// Timeout bounds one Redis call (default 50 ms).
	Timeout time.Duration
	// Cooldown is how long the limiter fails open without calling Redis
	// after a failure (default 1 s).
	Cooldown time.Duration
	Logger   *slog.Logger
	// Now is the clock of the cooldown (tests may fix it).
	Now func() time.Time
}

// Check is one budget a request spends: a scope, the id within it, its limit.
type Check struct {
	Scope string
	ID    string
	Limit Limit
}

// Decision is the limiter's answer.
type Decision struct {
	Allowed bool
	// RetryAfter is when the refused request would be allowed.
	RetryAfter time.Duration
	// FailedOpen reports the request was allowed because Redis could not
	// be asked.
	FailedOpen bool
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1,
// as the Retry-After header wants it.
func (d Decision) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(d.RetryAfter.Seconds())))
}

// Stats are the limiter's counters.
type Stats struct {
	Allowed, Denied, FailOpen uint64
}

// Limiter spends budgets in Redis.
type Limiter struct {
	rdb  redis.Scripter
	opts Options

	allowed, denied, failOpen atomic.Uint64
	downUntil                 atomic.Int64 // unix ns; fail open without asking until then
	lastLog                   atomic.Int64
}

// New returns a Limiter on rdb (see NewClient for a suitably bounded client).
func New(rdb redis.Scripter, opts Options) *Limiter {
	if opts.Prefix == "" {
		opts.Prefix = "berth:rl"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Limiter{rdb: rdb, opts: opts}
}

// NewClient returns a go-redis client for url whose every call is bounded by
// timeout and never retried: a down Redis costs one short timeout.
func NewClient(url string, timeout time.Duration) (*redis.Client, error) {
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	if timeout <= 0 {
		timeout = 50 * time.Millisecond
	}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolTimeout = timeout, timeout, timeout, timeout
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return redis.NewClient(ro), nil
}

// Key is the Redis key of one budget. Long ids are hashed so a client cannot
// make keys of arbitrary size.
func (l *Limiter) Key(scope, id string) string {
	if len(id) > 96 {
		sum := sha256.Sum256([]byte(id))
		id = "h:" + hex.EncodeToString(sum[:16])
	}
	return l.opts.Prefix + ":" + scope + ":" + id
}

// Allow spends one request from every check's budget, or from none. With no
// checks it allows without asking Redis.
func (l *Limiter) Allow(ctx context.Context, checks ...Check) Decision {
	if len(checks) == 0 {
		return Decision{Allowed: true}
	}
	now := l.opts.Now()
	if now.UnixNano() < l.downUntil.Load() {
		l.failOpen.Add(1)
		return Decision{Allowed: true, FailedOpen: true}
	}
	keys := make([]string, len(checks))
	args := make([]any, 0, 2*len(checks))
	for i, c := range checks {
		keys[i] = l.Key(c.Scope, c.ID)
		emission := 1e6 / c.Limit.Rate // µs between requests at the sustained rate
		args = append(args, strconv.FormatFloat(emission, 'f', 3, 64), c.Limit.Burst)
	}
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	res, err := gcra.Run(ctx, l.rdb, keys, args...).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("unexpected script reply %v", res)
	}
	if err != nil {
		l.failOpen.Add(1)
		l.downUntil.Store(now.Add(l.opts.Cooldown).UnixNano())
		if last := l.lastLog.Load(); now.UnixNano()-last >= int64(l.opts.Cooldown) && l.lastLog.CompareAndSwap(last, now.UnixNano()) {
			l.opts.Logger.WarnContext(ctx, "rate limiter: redis unavailable, failing open", "cooldown", l.opts.Cooldown, "err", err)
		}
		return Decision{Allowed: true, FailedOpen: true}
	}
	if res[0] == 1 {
		l.allowed.Add(1)
		return Decision{Allowed: true}
	}
	l.denied.Add(1)
	return Decision{RetryAfter: time.Duration(res[1]) * time.Microsecond}
}

// Stats returns the counters.
func (l *Limiter) Stats() Stats {
	return Stats{Allowed: l.allowed.Load(), Denied: l.denied.Load(), FailOpen: l.failOpen.Load()}
}

// WriteMetrics writes the counters in Prometheus text format: every
// decision, fail_open being a request let through unchecked because Redis
// could not be asked (docs/SECURITY.md: the limiter fails open).
func (l *Limiter) WriteMetrics(w io.Writer) {
	st := l.Stats()
	fmt.Fprintln(w, "# HELP berth_ratelimit_decisions_total Rate-limit decisions: allowed and denied by Redis, fail_open allowed unchecked while Redis could not be asked.")
	fmt.Fprintln(w, "# TYPE berth_ratelimit_decisions_total counter")
	for _, d := range []struct {
		name string
		n    uint64
	}{{"allowed", st.Allowed}, {"denied", st.Denied}, {"fail_open", st.FailOpen}} {
		fmt.Fprintf(w, "berth_ratelimit_decisions_total{decision=%q} %d\n", d.name, d.n)
	}
}
