package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
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
	"github.com/spf13/cobra"
)

// serveConfig is every setting of `router serve`.
type serveConfig struct {
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
	// telemetry adds options to telemetry.Setup (tests); tracing itself is
	// configured by the OTEL_* variables.
	telemetry []telemetry.Option
	// reads are the rate limits and waiting rooms (wire_reads.go).
	reads readsConfig
}

func loadServeConfig(cmd *cobra.Command) (serveConfig, error) {
	var (
		c    serveConfig
		errs config.Errors
		err  error
	)
	c.Region = config.Env("BERTH_REGION", "")
	c.Addr = config.Env("BERTH_HTTP_ADDR", ":8080")
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
	f := cmd.Flags()
	for name, dst := range map[string]*string{"region": &c.Region, "addr": &c.Addr, "booking-urls": &bookings, "readmodel-url": &c.ReadModelURL} {
		if v, _ := f.GetString(name); v != "" {
			*dst = v
		}
	}
	if c.BookingURLs, err = config.RegionURLs("BERTH_BOOKING_URLS", bookings); err != nil {
		errs.Check(err)
	}
	if !berth.ValidRegion(c.Region) {
		errs.Add("BERTH_REGION (--region) = %q: want one of %v", c.Region, berth.Regions())
	} else if c.BookingURLs[c.Region] == "" {
		errs.Add("BERTH_BOOKING_URLS (--booking-urls): want region=url for every region, at least %s", c.Region)
	}
	for r := range c.BookingURLs {
		if !berth.ValidRegion(r) {
			errs.Add("BERTH_BOOKING_URLS: unknown region %q", r)
		}
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
	c.reads = loadReadsConfig(&errs)
	c.OriginCounts, err = config.Bool("BERTH_ORIGIN_COUNTS", c.reads.RedisURL != "")
	errs.Check(err)
	if c.OriginCounts && c.reads.RedisURL == "" {
		errs.Add("BERTH_ORIGIN_COUNTS: needs BERTH_REDIS_URL")
	}
	if err := errs.Err(); err != nil {
		return c, cli.Usage(err)
	}
	return c, nil
}

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the public API of one region",
		Long: `serve runs the edge of one region: writes go to the partition's home region,
reads to this region, /v1/guests/* to the read model.

Environment: BERTH_PPROF_ADDR (off; e.g. 127.0.0.1:6060: net/http/pprof on its own listener), BERTH_REGION, BERTH_HTTP_ADDR (:8080), BERTH_BOOKING_URLS
(region=url,…), BERTH_READMODEL_URL, BERTH_DATABASE_URL (the placement
directory), BERTH_NATS_URL (optional: follow placement.moved events),
BERTH_DIRECTORY_REFRESH (30s), BERTH_FOLLOW_MOVES_FOR (10s: how long a request
follows its partition's moves before 503), BERTH_MAX_BODY_BYTES (1048576),
BERTH_SHUTDOWN_TIMEOUT (20s), BERTH_LOG_FORMAT (json|text); BERTH_REDIS_URL,
BERTH_RATE_LIMITS (e.g. hotel_writes=200/s:400,client_reads=100/s,guest_holds=5/s),
BERTH_WAITING_ROOMS (JSON or @file), BERTH_WAITING_ROOM_KEYS, BERTH_TOKEN_SECRET
(required with waiting rooms), BERTH_TOKEN_MAX_TTL (24h), BERTH_TRUSTED_PROXIES
(CIDRs of the proxies in front of the router: only their X-Forwarded-For is
believed; unset, the peer address is the client).
GOGC (400 unless set: the collector's target; bound the heap with GOMEMLIMIT).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadServeConfig(cmd)
			if err != nil {
				return err
			}
			cfg.GCPercent = config.ServiceGC()
			return run(ctxOrBackground(cmd.Context()), cfg, cmd.OutOrStdout(), nil)
		},
	}
	cmd.Flags().String("region", "", "region this router serves (BERTH_REGION)")
	cmd.Flags().String("addr", "", "listen address (BERTH_HTTP_ADDR, default :8080)")
	cmd.Flags().String("booking-urls", "", "region=url,… of the booking services (BERTH_BOOKING_URLS)")
	cmd.Flags().String("readmodel-url", "", "read model base URL (BERTH_READMODEL_URL)")
	return cmd
}

// run wires the router by hand and serves until ctx ends. When ready is not
// nil, the bound address is sent on it once the server listens.
func run(ctx context.Context, cfg serveConfig, stdout io.Writer, ready chan<- string) error {
	var h slog.Handler = slog.NewJSONHandler(stdout, nil)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(stdout, nil)
	}
	log := slog.New(telemetry.LogHandler(h)).With("service", "router", "region", cfg.Region)
	tel, flushTelemetry, err := telemetry.Setup(ctx, "router", cfg.Region, cfg.telemetry...)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer flushWithin(flushTelemetry, 5*time.Second)
	// Profiles on an ops listener of their own, off unless configured.
	if _, err := telemetry.ServePprof(ctx, config.Env(telemetry.PprofAddrEnv, ""), log); err != nil {
		return cli.Usage(err)
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{MaxConns: 4, StatementTimeout: 5 * time.Second, Telemetry: tel})
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	dir := placement.NewDirectory(postgres.NewPlacements(db), log)
	if err := dir.Load(ctx); err != nil {
		// Not fatal: /readyz says not ready and the refresher keeps trying.
		log.Warn("placement directory: first load failed", "err", err)
	}
	var writes router.WriteCounter
	stopCounts := func() {}
	if cfg.OriginCounts {
		rdb, err := ratelimit.NewClient(cfg.reads.RedisURL, time.Second)
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
	rt, err := router.New(router.Config{
		Region: cfg.Region, Bookings: cfg.BookingURLs, ReadModel: cfg.ReadModelURL, Directory: dir,
		Logger: log, MaxBodyBytes: int64(cfg.MaxBodyBytes), Ready: db.Ping, FollowMovesFor: cfg.FollowMovesFor,
		Transport: tel.HopTransport(router.NewTransport()), Writes: writes, TrustedProxies: cfg.reads.Proxies,
	})
	if err != nil {
		return cli.Usage(err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	lim, closeLimiter, err := newLimiter(cfg.reads, cfg.Region, log)
	if err != nil {
		return cli.Usage(err)
	}
	defer closeLimiter()
	handler, closeReads, err := withReads(cfg.reads, lim, log, instrument(tel, rt, lim))
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
	log.Info("listening", "addr", ln.Addr().String(), "gc_percent", cfg.GCPercent, "bookings", cfg.BookingURLs, "readmodel", cfg.ReadModelURL)
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
