package main

import (
	"context"
	"errors"
	"time"

	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/searchindex"
	"github.com/google/uuid"
)

// wireSearch wires the region's search index (docs/adr/0009-search-index.md)
// when NATS is configured: an in-memory index in this process, built from a
// snapshot of the catalog at start and kept current by its own consumer of
// the catalog and inventory events; GET /v1/hotels is answered from it and
// /readyz waits for its first build. The rebuild routes (role ops) and
// `booking search rebuild` start a new build that is swapped in behind the
// index's alias.
//
// Environment: BERTH_SEARCH (true; false answers search from the database
// as before the index existed).
func wireSearch(ctx context.Context, w *wiring) error {
	on, err := config.Bool("BERTH_SEARCH", true)
	if err != nil {
		return cli.Usage(err)
	}
	if !on || w.js == nil {
		if on {
			w.log.Warn("no NATS: hotel search reads the database (city searches only)")
		}
		if w.js != nil {
			// No index: the region's own cache consumer, shared by its
			// replicas.
			w.runners = append(w.runners, func(ctx context.Context) {
				if err := natsbus.InvalidateCache(ctx, w.js, w.cfg.Region, w.invalidator, w.log); err != nil {
					w.log.Error("cache invalidation stopped", "err", err)
				}
			})
		}
		return nil
	}
	idx := searchindex.New(w.log.With("component", "search"))
	idx.OnApplied = func(at time.Time) { w.tel.SearchLag(context.Background(), time.Since(at)) }
	if err := w.tel.ObserveSearch(func() (int64, bool) { return int64(idx.Stats().Hotels), idx.Ready() }); err != nil {
		return err
	}
	// The snapshot is read from the primary pool: the store of this
	// region reads every region's catalog (the search covers them all).
	src := searchindex.Source(w.store)
	// Builds started by an operator stop with the service.
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	w.closers = append(w.closers, func() { stop(); _ = idx.Close() })
	w.api.Search = idx
	w.api.SearchAdmin = searchAdmin{idx: idx, start: func() error { return idx.StartBuild(bg, src) }}
	w.ready = append(w.ready, readyCheck{"search", func(context.Context) error {
		if !idx.Ready() {
			return errors.New("the search index is being built")
		}
		return nil
	}})
	// One consumer feeds the index and invalidates the region's cache
	// (docs/adr/0019): one delivery per event and process instead of two.
	cfg := searchindex.ConsumerWithCacheConfig(w.cfg.Region, uuid.NewString()[:8], w.cacheReplay, w.log)
	cfg.TracerProvider = w.tel.TracerProvider()
	handle := natsbus.WithInvalidation(w.invalidator, idx.Handle)
	w.runners = append(w.runners, func(ctx context.Context) {
		if err := idx.RunWith(ctx, w.js, cfg, src, handle); err != nil {
			w.log.Error("search consumer stopped", "err", err)
		}
	})
	return nil
}

// searchAdmin is the httpapi.SearchAdmin of the service's index; start
// starts a build on the service's background context.
type searchAdmin struct {
	idx   *searchindex.Index
	start func() error
}

func (a searchAdmin) Rebuild() error                 { return a.start() }
func (a searchAdmin) Progress() searchindex.Progress { return a.idx.Progress() }
func (a searchAdmin) Stats() searchindex.Stats       { return a.idx.Stats() }
