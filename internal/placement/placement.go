// Package placement owns the placement directory as the router sees it: which
// region is home to each partition (hotel or clinic), at which version, cached
// in memory and refreshed from the database periodically, on demand after a
// 421 misdirected, and by placement.moved events (Apply). It also computes
// the operators' plans (drain, balance) as pure functions. It imports only
// the standard library and Berth's shared vocabulary.
package placement

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/berth"
)

// lookupTimeout bounds a shared look-up of a missed partition when its first
// caller set no deadline.
const lookupTimeout = 5 * time.Second

// Placement is one row of the directory: a partition and its home.
type Placement struct {
	Kind        berth.Kind `json:"kind"`
	PartitionID string     `json:"partition_id"`
	HomeRegion  string     `json:"home_region"`
	Version     int64      `json:"version"`
	UpdatedAt   time.Time  `json:"updated_at,omitzero"`
}

// ErrNotFound reports a partition without a placement row.
var ErrNotFound = errors.New("placement not found")

// Source is where the directory loads placements from (the database).
type Source interface {
	// ListPlacements returns every placement, optionally filtered by kind
	// and home region ("" = any).
	ListPlacements(ctx context.Context, kind berth.Kind, region string) ([]Placement, error)
	// GetPlacement returns one placement, or an error wrapping ErrNotFound.
	GetPlacement(ctx context.Context, kind berth.Kind, partitionID string) (Placement, error)
}

type key struct {
	kind berth.Kind
	id   string
}

type entry struct {
	region  string
	version int64
}

// Directory is the in-memory placement cache of one router. It is safe for
// concurrent use. An entry is never replaced by an older version, so a slow
// full reload can never undo a newer refresh or event.
type Directory struct {
	src Source
	log *slog.Logger
	// negativeTTL bounds how long an unknown partition is remembered as
	// unknown, so garbage ids cannot turn every request into a query.
	negativeTTL time.Duration
	now         func() time.Time

	mu      sync.RWMutex
	m       map[key]entry
	lookups map[key]*lookup   // a missed partition's look-up in flight
	missing map[key]time.Time // unknown partitions → when we looked
	loaded  bool

	// refreshes counts database look-ups (for /metrics).
	refreshes, reloads, applied uint64
}

// NewDirectory returns an empty directory over src; call Load before use.
func NewDirectory(src Source, log *slog.Logger) *Directory {
	if log == nil {
		log = slog.Default()
	}
	return &Directory{src: src, log: log, negativeTTL: time.Second, now: time.Now,
		m: map[key]entry{}, missing: map[key]time.Time{}, lookups: map[key]*lookup{}}
}

// lookup is one look-up of a missed partition, shared by every miss of it
// while it runs; done is closed when its result is set.
type lookup struct {
	done   chan struct{}
	region string
	found  bool
	err    error
}

// Lookup returns the cached home of a partition.
func (d *Directory) Lookup(kind berth.Kind, id string) (region string, version int64, ok bool) {
	d.mu.RLock()
	e, ok := d.m[key{kind, id}]
	d.mu.RUnlock()
	return e.region, e.version, ok
}

// Apply records that a partition is homed in region at version, unless the
// directory already knows a newer (or the same) version. It reports whether
// the entry changed. A placement.moved consumer calls it.
func (d *Directory) Apply(kind berth.Kind, id, region string, version int64) bool {
	k := key{kind, id}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.missing, k)
	if cur, ok := d.m[k]; ok && cur.version >= version {
		return false
	}
	d.m[k] = entry{region: region, version: version}
	d.applied++
	return true
}

// Resolve returns the home of a partition: from the cache, or — on a miss —
// from the source (an unknown partition is remembered briefly). ok is false
// when the partition does not exist.
//
// The misses of one partition share one look-up: a new hotel's first sale sends
// requests to every router within milliseconds of its creation, and each miss
// asked the database on its own until the first answer came — 19 look-ups in a
// first sale on loopback, one per request arriving meanwhile in general, so
// many more where the database is slower to answer (docs/PERFORMANCE.md, "A new
// hotel's first sale: one look-up per router"). Joining a look-up already in
// flight is safe for a miss: it has no answer of its own to distrust, and a
// home that changed meanwhile is caught by the booking service's fence (421),
// after which Refresh reads anew, alone. The shared look-up does not end with
// the caller that started it (only at its deadline): a client hanging up must
// not fail the others.
func (d *Directory) Resolve(ctx context.Context, kind berth.Kind, id string) (region string, ok bool, err error) {
	k := key{kind, id}
	d.mu.RLock()
	region, ok, hit := d.cachedLocked(k)
	d.mu.RUnlock()
	if hit {
		return region, ok, nil
	}
	d.mu.Lock()
	if region, ok, hit := d.cachedLocked(k); hit { // a look-up ended since the first glance
		d.mu.Unlock()
		return region, ok, nil
	}
	l, joined := d.lookups[k]
	if !joined {
		l = &lookup{done: make(chan struct{})}
		d.lookups[k] = l
	}
	d.mu.Unlock()
	if !joined {
		deadline, has := ctx.Deadline()
		if !has {
			deadline = time.Now().Add(lookupTimeout)
		}
		go func() {
			lctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
			defer cancel()
			l.region, l.found, l.err = d.Refresh(lctx, kind, id)
			d.mu.Lock()
			delete(d.lookups, k)
			d.mu.Unlock()
			close(l.done)
		}()
	}
	select {
	case <-ctx.Done():
		return "", false, ctx.Err()
	case <-l.done:
		return l.region, l.found, l.err
	}
}

// cachedLocked answers for a partition from the cache (hit): its home, or
// that it was found missing less than negativeTTL ago (ok false). The
// caller holds d.mu.
func (d *Directory) cachedLocked(k key) (region string, ok, hit bool) {
	if e, found := d.m[k]; found {
		return e.region, true, true
	}
	if at, known := d.missing[k]; known && d.now().Sub(at) < d.negativeTTL {
		return "", false, true
	}
	return "", false, false
}

// Refresh reads one partition's placement from the source and applies it
// (after a 421, or a cache miss).
func (d *Directory) Refresh(ctx context.Context, kind berth.Kind, id string) (region string, ok bool, err error) {
	d.mu.Lock()
	d.refreshes++
	d.mu.Unlock()
	p, err := d.src.GetPlacement(ctx, kind, id)
	if errors.Is(err, ErrNotFound) {
		d.mu.Lock()
		d.missing[key{kind, id}] = d.now()
		if len(d.missing) > 100_000 { // bounded: forget the lot rather than grow
			d.missing = map[key]time.Time{}
		}
		d.mu.Unlock()
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	d.Apply(p.Kind, p.PartitionID, p.HomeRegion, p.Version)
	r, _, _ := d.Lookup(kind, id)
	return r, true, nil
}

// Load reads every placement from the source and merges it in.
func (d *Directory) Load(ctx context.Context) error {
	all, err := d.src.ListPlacements(ctx, "", "")
	if err != nil {
		return err
	}
	for _, p := range all {
		d.Apply(p.Kind, p.PartitionID, p.HomeRegion, p.Version)
	}
	d.mu.Lock()
	d.loaded = true
	d.reloads++
	d.mu.Unlock()
	return nil
}

// Loaded reports whether a full load has succeeded (readiness).
func (d *Directory) Loaded() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.loaded
}

// Run reloads the directory every interval until ctx ends (every second
// while no load has succeeded yet, so a router started before its database
// becomes ready soon after it).
func (d *Directory) Run(ctx context.Context, interval time.Duration) {
	for {
		wait := interval
		if !d.Loaded() {
			wait = min(interval, time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := d.Load(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("placement directory reload failed", "err", err)
		}
	}
}

// Stats are the directory's counters for /metrics.
type Stats struct {
	Entries                     int
	Refreshes, Reloads, Applied uint64
}

// Stats returns the current counters.
func (d *Directory) Stats() Stats {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return Stats{Entries: len(d.m), Refreshes: d.refreshes, Reloads: d.reloads, Applied: d.applied}
}

// MoveResult is the outcome of moving a partition.
type MoveResult struct {
	Placement
	FromRegion string `json:"from_region"`
	// Moved is false when the partition was homed in the target already:
	// a move is idempotent (nothing changes, the version stays).
	Moved bool `json:"moved"`
	// Rows is how many partition rows were re-homed.
	Rows int64 `json:"rows_rehomed"`
}
