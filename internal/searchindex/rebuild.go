package searchindex

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/reservation"
	"github.com/blevesearch/bleve/v2"
	"golang.org/x/sync/errgroup"
)

// Source is the snapshot a build starts from: the catalog and the
// inventory of every region, read once per build (never by a search).
// postgres.Store implements it.
type Source interface {
	// ScanCatalog calls fn with pages of hotels, each with its room types
	// and catalog version.
	ScanCatalog(ctx context.Context, fn func([]reservation.Hotel) error) error
	// ScanInventory calls fn with the nights from `from` on of one room type
	// at a time (with each night's version).
	ScanInventory(ctx context.Context, from reservation.Date, fn func(reservation.RoomNights) error) error
}

// Progress says where a build is.
type Progress struct {
	State      string    `json:"state"` // idle | snapshot | indexing | swapping | done | failed
	Generation string    `json:"generation,omitempty"`
	Hotels     int       `json:"hotels"` // read from the snapshot so far
	Nights     int       `json:"nights"`
	Indexed    int       `json:"indexed"` // documents in the new index
	Total      int       `json:"total"`   // documents to index
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	Error      string    `json:"error,omitempty"`
}

// Progress returns the state of the current or last build.
func (x *Index) Progress() Progress { return *x.progress.Load() }

// ErrBuilding refuses a build while another runs.
var ErrBuilding = errors.New("a search index build is already running")

// Build builds a new generation of the index and swaps it in:
//
//  1. the new (empty) generation is registered, so every event applied
//     from now on is indexed in it as well as in the live one;
//  2. the snapshot (catalog and inventory of the source) is merged into
//     the catalog and the summary — by version, so an event applied
//     meanwhile is never overwritten by an older snapshot row;
//  3. every hotel of the catalog is indexed in the new generation (again by
//     version: an event that indexed a newer state first wins);
//  4. the alias swaps the new generation for the live one in one step and
//     the old one is closed.
//
// Searches go to the live generation throughout; the first build makes
// the index ready. Events that were committed before the snapshot are in
// it; those after it reach the consumer, which runs throughout — so the
// new generation holds the snapshot plus every event that follows it.
func (x *Index) Build(ctx context.Context, src Source) error {
	if !x.building.CompareAndSwap(false, true) {
		return ErrBuilding
	}
	defer x.building.Store(false)
	return x.build(ctx, src)
}

// StartBuild starts Build in the background and returns at once (the
// operators' rebuild); ErrBuilding when a build runs. Progress follows it.
func (x *Index) StartBuild(ctx context.Context, src Source) error {
	if !x.building.CompareAndSwap(false, true) {
		return ErrBuilding
	}
	x.progress.Store(&Progress{State: "starting", StartedAt: time.Now().UTC()})
	go func() {
		defer x.building.Store(false)
		if err := x.build(ctx, src); err != nil {
			x.log.Error("search index rebuild failed; the previous generation keeps serving", "err", err)
		}
	}()
	return nil
}

func (x *Index) build(ctx context.Context, src Source) (err error) {
	g, err := newGeneration()
	if err != nil {
		return err
	}
	p := Progress{State: "snapshot", Generation: g.id, StartedAt: time.Now().UTC()}
	x.progress.Store(&p)
	set := func(f func(p *Progress)) {
		c := *x.progress.Load()
		f(&c)
		x.progress.Store(&c)
	}
	defer func() {
		if err != nil {
			x.mu.Lock()
			if x.next == g {
				x.next = nil
			}
			x.mu.Unlock()
			_ = g.idx.Close()
			set(func(p *Progress) { p.State, p.Error, p.FinishedAt = "failed", err.Error(), time.Now().UTC() })
		}
	}()
	x.mu.Lock()
	x.next = g
	x.mu.Unlock()

	// The three parts of a build overlap: the catalog is read page by page
	// and each page is indexed by a second goroutine while the next is read,
	// and the inventory is read at the same time on its own connection
	// (the summary is apart from the bleve index). Reading waits on the
	// database most of the time, so indexing and reading share the time
	// rather than add up.
	var (
		pages    = make(chan []*reservation.Hotel, 4)
		reading  sync.WaitGroup
		all      int
		progress sync.Mutex // orders set() calls of the goroutines
	)
	update := func(f func(p *Progress)) {
		progress.Lock()
		defer progress.Unlock()
		set(f)
	}
	eg, ectx := errgroup.WithContext(ctx)
	reading.Add(2)
	eg.Go(func() error {
		defer reading.Done()
		defer close(pages)
		err := src.ScanCatalog(ectx, func(hs []reservation.Hotel) error {
			page := make([]*reservation.Hotel, 0, len(hs))
			for i := range hs {
				h := hs[i]
				if h.Amenities == nil {
					h.Amenities = []string{}
				}
				x.cat.apply(&h)
				page = append(page, &hs[i])
			}
			update(func(p *Progress) { p.Hotels += len(hs); p.Total += len(hs) })
			select {
			case pages <- page:
				return nil
			case <-ectx.Done():
				return ectx.Err()
			}
		})
		if err != nil {
			return fmt.Errorf("search build: catalog snapshot: %w", err)
		}
		return nil
	})
	eg.Go(func() error {
		defer reading.Done()
		// Past nights are of no use to a search.
		from := today().AddDays(-1)
		err := src.ScanInventory(ectx, from, func(rn reservation.RoomNights) error {
			if _, err := x.sum.applySnapshot(dayNumber(from), rn); err != nil {
				return err
			}
			update(func(p *Progress) { p.Nights += len(rn.Offsets) })
			return nil
		})
		if err != nil {
			return fmt.Errorf("search build: inventory snapshot: %w", err)
		}
		return nil
	})
	eg.Go(func() error {
		// "indexing" once the snapshot is read: what is left is the index.
		reading.Wait()
		if ectx.Err() == nil {
			update(func(p *Progress) { p.State = "indexing" })
		}
		return nil
	})
	eg.Go(func() error {
		const batch = 5000
		var pending []*reservation.Hotel
		flush := func() error {
			// Read the newest state of each hotel at indexing time: an
			// event applied since its page was read wins.
			for i, h := range pending {
				pending[i] = x.cat.get(h.ID)
			}
			if err := g.put(pending); err != nil {
				return err
			}
			all += len(pending)
			n := len(pending)
			update(func(p *Progress) { p.Indexed += n })
			pending = pending[:0]
			return nil
		}
		for page := range pages {
			pending = append(pending, page...)
			if len(pending) >= batch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := ectx.Err(); err != nil {
			return err
		}
		return flush()
	})
	if err := eg.Wait(); err != nil {
		return err
	}

	set(func(p *Progress) { p.State = "swapping" })
	x.mu.Lock()
	old := x.live
	if old != nil {
		x.alias.Swap([]bleve.Index{g.idx}, []bleve.Index{old.idx})
	} else {
		x.alias.Add(g.idx)
	}
	x.live, x.next = g, nil
	x.mu.Unlock()
	x.ready.Store(true)
	if old != nil {
		// The alias waits for searches in flight on the old index before a
		// swap returns, so nothing reads it any more.
		if err := old.idx.Close(); err != nil {
			x.log.Warn("close old search index", "generation", old.id, "err", err)
		}
	}
	set(func(p *Progress) { p.State, p.FinishedAt = "done", time.Now().UTC() })
	x.log.Info("search index built", "generation", g.id, "hotels", all, "took", time.Since(p.StartedAt).String())
	return nil
}
