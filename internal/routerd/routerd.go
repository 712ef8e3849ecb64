// Package routerd runs a region's router (internal/router) as a service: its
// settings, the placement directory and its refreshers, the write-origin
// counts, the rate limits and waiting rooms in front of it, its telemetry
// and its listener. `router serve` runs it as a process of its own (the
// split layout); `booking serve --route` runs it inside the region's
// booking service, which then serves its own region's requests in-process
// (the together layout, ADR 0022). The router is the same in both.
package routerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/origins"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/berthhq/berth/internal/router"
	"github.com/berthhq/berth/internal/telemetry"
)

// Config is every setting of a region's router.
type Config struct {
	// GCPercent is the collector's target in force (config.ServiceGC), logged at start.
	GCPercent        int
	Region           string
	Addr             string
	BookingURLs      map[string]string
	ReadModelURL     string
	DatabaseURL      string
	NatsURL          string
	DirectoryRefresh time.Duration
	FollowMovesFor   time.Duration
	// OriginCounts: tally writes by partition in Redis for placement by
	// origin (BERTH_ORIGIN_COUNTS, default on when BERTH_REDIS_URL is set).
	OriginCounts    bool
	MaxBodyBytes    int
	ShutdownTimeout time.Duration
	LogFormat       string
	// PprofAddr is net/http/pprof's own listener (BERTH_PPROF_ADDR; "" is
	// off). An embedded router leaves it to its booking service.
	PprofAddr string
	// Telemetry adds options to telemetry.Setup (tests; an embedded router
	// leaves the process's global providers to its booking service).
	// Tracing itself is configured by the OTEL_* variables.
	Telemetry []telemetry.Option
	// Reads are the rate limits and waiting rooms (reads.go).
	Reads ReadsConfig
	// Local, when set, is this region's booking service in the same
	// process: requests for BookingURLs[Region] are served by it without a
	// socket (router.InProcess). The booking service sets it; it is never
	// read from the environment.
	Local http.Handler
}

// Overrides are the command line's settings, which win over the
// environment's.
type Overrides struct {
	Region, Addr, BookingURLs, ReadModelURL string
}

// Load reads the settings of a router process from the BERTH_* environment
// and the command line.
func Load(o Overrides) (Config, error) { return load(o, false) }

// LoadEmbedded reads the settings of a router run inside its region's
// booking service (`booking serve --route`). Two differ from a router
// process's: it listens on BERTH_ROUTER_ADDR (BERTH_HTTP_ADDR is the
// booking service's own listener, the one other regions' routers reach),
// and BERTH_BOOKING_URLS need not name its own region, which it serves
// in-process (the booking service fills in its own address). Profiles are
// the booking service's.
func LoadEmbedded(o Overrides) (Config, error) { return load(o, true) }

func load(o Overrides, embedded bool) (Config, error) {
	var (
		c    Config
		errs config.Errors
		err  error
	)
	addrVar := "BERTH_HTTP_ADDR (--addr)"
	c.Region = config.Env("BERTH_REGION", "")
	if embedded {
		addrVar = "BERTH_ROUTER_ADDR"
		c.Addr = config.Env("BERTH_ROUTER_ADDR", ":8088")
	} else {
		c.Addr = config.Env("BERTH_HTTP_ADDR", ":8080")
		c.PprofAddr = config.Env(telemetry.PprofAddrEnv, "")
	}
	bookings := config.Env("BERTH_BOOKING_URLS", "")
	c.ReadModelURL = config.Env("BERTH_READMODEL_URL", "")
	c.DatabaseURL = config.Env("BERTH_DATABASE_URL", "")
	c.NatsURL = config.Env("BERTH_NATS_URL", "")
	c.LogFormat = config.Env("BERTH_LOG_FORMAT", "json")
	c.DirectoryRefresh, err = config.Duration("BERTH_DIRECTORY_REFRESH", 30*time.Second)
	errs.Check(err)
	c.FollowMovesFor, err = config.Duration("BERTH_FOLLOW_MOVES_FOR", 10*time.Second)
	errs.Check(err)
	c.ShutdownTimeout, err = config.Duration("BERTH_SHUTDOWN_TIMEOUT", 20*time.Second)
	errs.Check(err)
	c.MaxBodyBytes, err = config.Int("BERTH_MAX_BODY_BYTES", router.DefaultMaxBodyBytes)
	errs.Check(err)
	for dst, v := range map[*string]string{&c.Region: o.Region, &c.Addr: o.Addr, &bookings: o.BookingURLs, &c.ReadModelURL: o.ReadModelURL} {
		if v != "" {
			*dst = v
		}
	}
	if c.BookingURLs, err = config.RegionURLs("BERTH_BOOKING_URLS", bookings); err != nil {
		errs.Check(err)
	}
	if c.BookingURLs == nil {
		c.BookingURLs = map[string]string{}
	}
	if !berth.ValidRegion(c.Region) {
		errs.Add("BERTH_REGION (--region) = %q: want one of %v", c.Region, berth.Regions())
	} else if c.BookingURLs[c.Region] == "" && !embedded {
		errs.Add("BERTH_BOOKING_URLS (--booking-urls): want region=url for every region, at least %s", c.Region)
	}
	for r := range c.BookingURLs {
		if !berth.ValidRegion(r) {
			errs.Add("BERTH_BOOKING_URLS: unknown region %q", r)
		}
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs.Add("%s = %q: want host:port, e.g. :8080", addrVar, c.Addr)
	}
	if c.DatabaseURL == "" {
		errs.Add("BERTH_DATABASE_URL: required (the placement directory)")
	}
	if c.DirectoryRefresh < time.Second {
		errs.Add("BERTH_DIRECTORY_REFRESH: at least 1s")
	}
	if c.FollowMovesFor < 100*time.Millisecond {
		errs.Add("BERTH_FOLLOW_MOVES_FOR: at least 100ms")
	}
	if c.MaxBodyBytes < 1024 {
		errs.Add("BERTH_MAX_BODY_BYTES: at least 1024")
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs.Add("BERTH_LOG_FORMAT: want json or text")
	}
	for _, e := range telemetry.CheckEnv() {
		errs.Add("%s", e)
	}
	c.Reads = loadReads(&errs)
	c.OriginCounts, err = config.Bool("BERTH_ORIGIN_COUNTS", c.Reads.RedisURL != "")
	errs.Check(err)
	if c.OriginCounts && c.Reads.RedisURL == "" {
		errs.Add("BERTH_ORIGIN_COUNTS: needs BERTH_REDIS_URL")
	}
	if err := errs.Err(); err != nil {
		return c, cli.Usage(err)
	}
	return c, nil
}

// Run wires the router by hand and serves until ctx ends. When ready is not
// nil, the bound address is sent on it once the server listens.
// Up to hopWarmConns connections to every booking service reached over
// the network are kept open (that many requests in flight together open
// fewer when some are answered before others start), re-used at least every hopWarmEvery (under the
// transport's 90 s idle timeout): a flash sale's first requests would
// otherwise each dial one (docs/PERFORMANCE.md, "A fresh platform's first
// sale": the hop's gap grew to tens of ms in a platform's first sale, and
// stayed under a ms in its second, which found the first one's open).
const (
	hopWarmConns = 32
	hopWarmEvery = time.Minute
)

// keepHopWarm opens n connections to each of urls at once (n requests to
// its /healthz in flight together; the transport keeps them idle after)
// now and every interval until ctx ends. Best effort: a booking service
// that does not answer is simply not warmed (forwarding reports its
// failures), and the router's readiness does not depend on it.
func keepHopWarm(ctx context.Context, t http.RoundTripper, urls []string, n int, every time.Duration) {
	c := &http.Client{Transport: t, Timeout: 5 * time.Second}
	for {
		var wg sync.WaitGroup
		for _, u := range urls {
			for range n {
				wg.Go(func() {
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/healthz", nil)
					if err != nil {
						return
					}
					if resp, err := c.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// dbConns is the router's pool: placement reads only (a cache miss, the
// directory's reload), all kept open and warm.
const dbConns = 4

func Run(ctx context.Context, cfg Config, stdout io.Writer, ready chan<- string) error {
	var h slog.Handler = slog.NewJSONHandler(stdout, nil)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(stdout, nil)
	}
	log := slog.New(telemetry.LogHandler(h)).With("service", "router", "region", cfg.Region)
	tel, flushTelemetry, err := telemetry.Setup(ctx, "router", cfg.Region, cfg.Telemetry...)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer flushWithin(flushTelemetry, 5*time.Second)
	// Profiles on an ops listener of their own, off unless configured.
	if _, err := telemetry.ServePprof(ctx, cfg.PprofAddr, log); err != nil {
		return cli.Usage(err)
	}
	// Every connection of the pool is opened, and has planned the
	// placement read of a cache miss, before the router reports ready: a
	// flash sale of a new hotel misses at every router at once, and on a
	// fresh platform those misses would each open a connection to a cold
	// backend (docs/PERFORMANCE.md, "A fresh platform's first sale").
	db, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{MaxConns: dbConns, MinConns: dbConns,
		StatementTimeout: 5 * time.Second, Telemetry: tel, Warm: postgres.PlacementStatements()})
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	var warm atomic.Bool
	warmDone := make(chan struct{})
	defer func() { <-warmDone }() // before db.Close
	warmCtx, stopWarm := context.WithCancel(ctx)
	defer stopWarm()
	go func() {
		defer close(warmDone)
		if db.WarmUntilDone(warmCtx, dbConns, postgres.WarmRetry{First: 100 * time.Millisecond, Max: 5 * time.Second}, postgres.LogWarmUp(log)) {
			warm.Store(true)
		}
	}()
	warmReady := func(ctx context.Context) error {
		if !warm.Load() {
			return postgres.ErrNotWarm
		}
		return db.Ping(ctx)
	}
	dir := placement.NewDirectory(postgres.NewPlacements(db), log)
	if err := dir.Load(ctx); err != nil {
		// Not fatal: /readyz says not ready and the refresher keeps trying.
		log.Warn("placement directory: first load failed", "err", err)
	}
	var writes router.WriteCounter
	stopCounts := func() {}
	if cfg.OriginCounts {
		rdb, err := ratelimit.NewClient(cfg.Reads.RedisURL, time.Second)
		if err != nil {
			return cli.Usage(fmt.Errorf("BERTH_REDIS_URL: %w", err))
		}
		defer rdb.Close()
		counter := origins.NewCounter(rdb, cfg.Region, 2*time.Hour)
		countCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Redis down means a failure every second: say so once a minute.
			var lastWarn time.Time
			counter.Run(countCtx, time.Second, func(err error) {
				if time.Since(lastWarn) >= time.Minute {
					lastWarn = time.Now()
					log.Warn("write origins not recorded (placement by origin sees fewer writes; requests are unaffected)", "err", err)
				}
			})
		}()
		stopCounts = func() { cancel(); <-done }
		writes = counter
	}
	defer func() { stopCounts() }()
	hop := router.NewTransport()
	var upstream http.RoundTripper = hop
	var remote []string // the booking services reached over the network
	for region, u := range cfg.BookingURLs {
		if region != cfg.Region || cfg.Local == nil {
			remote = append(remote, u)
		}
	}
	hopCtx, stopHop := context.WithCancel(ctx)
	hopDone := make(chan struct{})
	go func() { defer close(hopDone); keepHopWarm(hopCtx, hop, remote, hopWarmConns, hopWarmEvery) }()
	defer func() { stopHop(); <-hopDone }()
	if cfg.Local != nil {
		// Under the hop's instrumentation, so the in-process request carries
		// the trace context exactly as a forwarded one does.
		if upstream, err = router.InProcess(cfg.Local, cfg.BookingURLs[cfg.Region], upstream, log); err != nil {
			return cli.Usage(err)
		}
	}
	rt, err := router.New(router.Config{
		Region: cfg.Region, Bookings: cfg.BookingURLs, ReadModel: cfg.ReadModelURL, Directory: dir,
		Logger: log, MaxBodyBytes: int64(cfg.MaxBodyBytes), Ready: warmReady, FollowMovesFor: cfg.FollowMovesFor,
		Transport: tel.HopTransport(upstream), Writes: writes, TrustedProxies: cfg.Reads.Proxies,
	})
	if err != nil {
		return cli.Usage(err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	lim, closeLimiter, err := newLimiter(cfg.Reads, cfg.Region, log)
	if err != nil {
		return cli.Usage(err)
	}
	defer closeLimiter()
	handler, closeReads, err := withReads(cfg.Reads, lim, log, instrument(tel, rt, lim))
	if err != nil {
		return cli.Usage(err)
	}
	defer closeReads()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	bg, stopBg := context.WithCancel(ctx)
	refresherDone := make(chan struct{})
	go func() { defer close(refresherDone); dir.Run(bg, cfg.DirectoryRefresh) }()
	movesDone := make(chan struct{})
	go func() {
		defer close(movesDone)
		if cfg.NatsURL == "" {
			return
		}
		// Moves reach the directory within moments; the periodic refresh
		// and the 421 re-send cover anything missed.
		if err := natsbus.FollowPlacements(bg, cfg.NatsURL, dir.Apply, log); err != nil {
			log.Warn("not following placement.moved events", "err", err)
		}
	}()
	defer func() { stopBg(); <-refresherDone; <-movesDone }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "gc_percent", cfg.GCPercent, "bookings", cfg.BookingURLs,
		"readmodel", cfg.ReadModelURL, "own_region_in_process", cfg.Local != nil)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}
