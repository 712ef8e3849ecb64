package main

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/search"
	"github.com/berthhq/berth/internal/telemetry"
)

// cacheConfig is the read path's configuration.
type cacheConfig struct {
	RedisURL      string        // BERTH_REDIS_URL; empty: no cache
	TTL           time.Duration // BERTH_CACHE_TTL (30s): the staleness bound when an invalidation is lost
	Timeout       time.Duration // BERTH_CACHE_TIMEOUT (50ms): bound of every Redis call
	FollowerReads bool          // BERTH_FOLLOWER_READS: misses read followers (CockroachDB only)
}

// followerReadLag is how far a CockroachDB follower read trails the
// present (follower_read_timestamp() is about 4.8 s behind).
const followerReadLag = 5 * time.Second

func loadCacheConfig() (cacheConfig, error) {
	var (
		c    cacheConfig
		errs config.Errors
		err  error
	)
	c.RedisURL = config.Env("BERTH_REDIS_URL", "")
	c.TTL, err = config.Duration("BERTH_CACHE_TTL", 30*time.Second)
	errs.Check(err)
	c.Timeout, err = config.Duration("BERTH_CACHE_TIMEOUT", 50*time.Millisecond)
	errs.Check(err)
	c.FollowerReads, err = config.Bool("BERTH_FOLLOWER_READS", false)
	errs.Check(err)
	if c.TTL < time.Second || c.TTL > time.Hour {
		errs.Add("BERTH_CACHE_TTL: 1s to 1h")
	}
	if c.Timeout < time.Millisecond || c.Timeout > 5*time.Second {
		errs.Add("BERTH_CACHE_TIMEOUT: 1ms to 5s")
	}
	if err := errs.Err(); err != nil {
		return c, cli.Usage(err)
	}
	return c, nil
}

// wireCache wires the read path: follower reads for misses when configured
// (CockroachDB only), and the regional Redis cache when BERTH_REDIS_URL is
// set — public reads go through it, hotel writes invalidate it, and
// w.api.Cache (a metered *rediscache.Cache) offers Events() for the event consumer.
// Redis being down at start is not an error: reads fall back to the database.
//
// Environment: BERTH_REDIS_URL, BERTH_CACHE_TTL (30s), BERTH_CACHE_TIMEOUT
// (50ms), BERTH_FOLLOWER_READS (false).
func wireCache(ctx context.Context, w *wiring) error {
	cfg, err := loadCacheConfig()
	if err != nil {
		return err
	}
	var readLag time.Duration
	if cfg.FollowerReads {
		rdb, err := postgres.OpenFollowerReads(ctx, w.db, w.cfg.DatabaseURL, postgres.Options{
			StatementTimeout: w.cfg.StatementTimeout, MaxConns: int32(max(w.cfg.MaxConns/2, 2))})
		switch {
		case err != nil:
			return err
		case rdb == nil:
			w.log.Warn("BERTH_FOLLOWER_READS ignored: follower reads exist on CockroachDB only", "engine", w.db.Engine.String())
		default:
			w.closers = append(w.closers, rdb.Close)
			w.api.Hotels = followerReads{HotelStore: w.api.Hotels, reads: postgres.NewStore(rdb, w.cfg.Region, w.cfg.HoldTTL)}
			readLag = followerReadLag
			w.log.Info("cache misses are follower reads")
		}
	}
	if cfg.RedisURL == "" {
		w.log.Warn("BERTH_REDIS_URL is not set: public reads go to the database (X-Cache: miss)")
		return nil
	}
	c, err := rediscache.New(cfg.RedisURL, rediscache.Options{Region: w.cfg.Region, TTL: cfg.TTL, Timeout: cfg.Timeout,
		ReadLag: readLag, Logger: w.log})
	if err != nil {
		return cli.Usage(fmt.Errorf("BERTH_REDIS_URL: %w", err))
	}
	w.closers = append(w.closers, func() { _ = c.Close() })
	if err := c.Ping(ctx); err != nil {
		w.log.Warn("redis cache not reachable at start; reads fall back to the database", "err", err)
	}
	w.api.Cache = meteredCache{Cache: c, tel: w.tel}
	if w.tel != nil {
		if err := w.tel.ObserveCache(func() telemetry.CacheStats {
			s := c.Stats()
			return telemetry.CacheStats{Invalidations: s.Invalidations, EventInvalidations: s.EventInvalidations,
				InvalidateErrors: s.InvalidateErr, BumpRounds: s.BumpRounds, EventRounds: s.EventRounds, BumpKeys: s.BumpKeys}
		}); err != nil {
			return err
		}
	}
	// A fill may land a request timeout after its read, and clocks differ
	// by a little: the margin covers both.
	w.cacheReplay = cfg.TTL + readLag + 5*time.Second
	w.log.Info("regional read cache on", "ttl", cfg.TTL.String(), "timeout", cfg.Timeout.String())
	return nil
}

// followerReads serves the public reads from the follower-read store and
// everything else (every write) from the primary store.
type followerReads struct {
	httpapi.HotelStore
	reads *postgres.Store
}

// The hotel store answers hotel search (httpapi asks for it by interface).
var _ httpapi.HotelSearcher = (*postgres.Store)(nil)

func (f followerReads) Availability(ctx context.Context, hotelID string, stay reservation.Stay, roomTypeID string) (reservation.Availability, error) {
	return f.reads.Availability(ctx, hotelID, stay, roomTypeID)
}

func (f followerReads) SearchHotels(ctx context.Context, q search.Query) (search.Page, error) {
	return f.reads.SearchHotels(ctx, q)
}

// meteredCache records every cached read as a hit or a miss
// (berth_cache_requests_total; the hit ratio is hits over the total).
type meteredCache struct {
	*rediscache.Cache
	tel *telemetry.Telemetry
}

func (m meteredCache) Fetch(ctx context.Context, kind, partitionID, name string, ttl time.Duration,
	load func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	body, hit, err := m.Cache.Fetch(ctx, kind, partitionID, name, ttl, load)
	if err == nil && m.tel != nil {
		result := "miss"
		if hit {
			result = "hit"
		}
		m.tel.CacheResult(ctx, kind, result)
	}
	return body, hit, err
}
