// Package searchindex owns the regional hotel search index: a bleve index of the hotel
// catalog and a summary of what is left per room type and night, both fed by
// booking events (hotel.catalog, inventory.changed) so that a search never
// reads the booking database; the queries (free text tolerant of case,
// accents and typos; city, geographic, amenity, guest, price and date
// filters; relevance, price and distance order; keyset pages); and the
// rebuild of the index behind an alias while searches go on.
//
// Everything here may be seconds stale and never feeds a write decision:
// a hold decides in the database, under its own lock.
package searchindex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/reservation"
	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/google/uuid"
)

// ErrNotReady is returned by searches before the first build finished.
var ErrNotReady = errors.New("search index is being built")

// Index is one region's search index. Its state has three parts, each
// merged by version so events may arrive late, twice or out of order:
//   - the catalog: the newest hotel.catalog state of every hotel;
//   - the summary: what is left of every room type and night;
//   - the bleve index of the catalog, behind an alias that a rebuild swaps.
type Index struct {
	log     *slog.Logger
	mapping mapping.IndexMapping // analyzes query text as documents are
	alias   bleve.IndexAlias
	cat     catalog
	sum     summary
	// OnApplied, when set, observes each event that changed the state, with
	// its event time (the lag metric).
	OnApplied func(eventTime time.Time)

	mu   sync.Mutex
	live *generation // what the alias serves; nil before the first build
	next *generation // being built, or nil

	ready    atomic.Bool
	building atomic.Bool
	progress atomic.Pointer[Progress]
}

// New returns an empty index; Build fills it.
func New(log *slog.Logger) *Index {
	if log == nil {
		log = slog.Default()
	}
	m, err := newMapping()
	if err != nil {
		panic(err) // a static mapping: a failure is a bug caught by every test
	}
	x := &Index{log: log, mapping: m, alias: bleve.NewIndexAlias()}
	x.cat.hotels = map[string]*reservation.Hotel{}
	x.sum.rooms = map[string]*nights{}
	x.progress.Store(&Progress{State: "idle"})
	return x
}

// Ready reports whether the first build finished (the index answers).
func (x *Index) Ready() bool { return x.ready.Load() }

// Close closes the bleve indexes.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	for _, g := range []*generation{x.live, x.next} {
		if g != nil {
			errs = append(errs, g.idx.Close())
		}
	}
	x.live, x.next = nil, nil
	return errors.Join(errs...)
}

// ApplyHotel merges a hotel's catalog state (older versions are ignored)
// and indexes the newest state in every generation. It reports whether the
// state was new. An error is the index's own failure (a dependency, to be
// retried), never the event's.
func (x *Index) ApplyHotel(h reservation.Hotel) (bool, error) {
	if h.Amenities == nil {
		h.Amenities = []string{}
	}
	fresh, cur := x.cat.apply(&h)
	// The catalog is updated before the generations are read: a rebuild
	// registers its generation first and reads the catalog after, so it
	// sees this state either way.
	for _, g := range x.writable() {
		if err := g.put([]*reservation.Hotel{cur}); err != nil {
			return fresh, err
		}
	}
	return fresh, nil
}

// ApplyInventory merges what is left of a room type's nights. It reports
// how many nights changed.
func (x *Index) ApplyInventory(c reservation.InventoryChange) (int, error) {
	return x.sum.apply(c.RoomTypeID, c.Nights)
}

func (x *Index) writable() []*generation {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]*generation, 0, 2)
	for _, g := range []*generation{x.live, x.next} {
		if g != nil {
			out = append(out, g)
		}
	}
	return out
}

// Stats is a count of what the index holds.
type Stats struct {
	Hotels     int    `json:"hotels"`
	RoomTypes  int    `json:"room_types"`
	Nights     int    `json:"nights"`
	Generation string `json:"generation"`
}

// Stats counts what the index holds.
func (x *Index) Stats() Stats {
	s := Stats{Hotels: x.cat.len()}
	s.RoomTypes, s.Nights = x.sum.size()
	x.mu.Lock()
	if x.live != nil {
		s.Generation = x.live.id
	}
	x.mu.Unlock()
	return s
}

// generation is one bleve index with the catalog version of each hotel it
// holds, so a stale write never overwrites a newer one.
type generation struct {
	id  string
	idx bleve.Index

	mu      sync.Mutex
	indexed map[string]int64
}

func newGeneration() (*generation, error) {
	m, err := newMapping()
	if err != nil {
		return nil, err
	}
	idx, err := openIndex(m)
	if err != nil {
		return nil, err
	}
	return &generation{id: uuid.NewString(), idx: idx, indexed: map[string]int64{}}, nil
}

// put indexes the hotels whose version this generation does not hold yet,
// in one batch.
func (g *generation) put(hs []*reservation.Hotel) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.idx.NewBatch()
	for _, h := range hs {
		if g.indexed[h.ID] >= h.CatalogVersion {
			continue
		}
		if err := b.Index(h.ID, document(h)); err != nil {
			return fmt.Errorf("search index %s: %w", h.ID, err)
		}
	}
	if b.Size() == 0 {
		return nil
	}
	if err := g.idx.Batch(b); err != nil {
		return fmt.Errorf("search index batch: %w", err)
	}
	for _, h := range hs {
		g.indexed[h.ID] = max(g.indexed[h.ID], h.CatalogVersion)
	}
	return nil
}

// catalog is the newest catalog state of every hotel. A stored hotel is
// never changed in place: a newer state replaces the pointer.
type catalog struct {
	mu     sync.RWMutex
	hotels map[string]*reservation.Hotel
}

// apply stores h unless a newer or equal version is there; it returns
// whether h was stored and the state now stored.
func (c *catalog) apply(h *reservation.Hotel) (bool, *reservation.Hotel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.hotels[h.ID]; ok && old.CatalogVersion >= h.CatalogVersion {
		return false, old
	}
	c.hotels[h.ID] = h
	return true, h
}

func (c *catalog) get(id string) *reservation.Hotel {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.hotels[id]
}

func (c *catalog) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.hotels)
}

// all returns every stored hotel.
func (c *catalog) all() []*reservation.Hotel {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*reservation.Hotel, 0, len(c.hotels))
	for _, h := range c.hotels {
		out = append(out, h)
	}
	return out
}

// withTimeout bounds a search.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 5*time.Second)
}
