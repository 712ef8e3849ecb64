package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/paymentprovider"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/routerd"
	"github.com/berthhq/berth/internal/soldout"
	"github.com/berthhq/berth/internal/telemetry"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// serveConfig is every setting of `booking serve`.
type serveConfig struct {
	// GCPercent is the collector's target in force (config.ServiceGC), logged at start.
	GCPercent   int
	Region      string
	Addr        string
	DatabaseURL string
	TokenSecret string
	TokenMaxTTL time.Duration
	Isolation   postgres.Isolation
	HoldTTL     time.Duration
	// OfferTTL is how long a waitlist offer's hold waits for its
	// confirmation (BERTH_WAITLIST_OFFER_TTL, 15m).
	OfferTTL time.Duration
	// SoldOutTTL bounds how long a learnt "sold out" refuses holds without
	// the database (BERTH_SOLDOUT_TTL; 0 turns the cache off).
	SoldOutTTL time.Duration
	// HoldBatch is the largest batch of holds of one room type decided in
	// one transaction (BERTH_HOLD_BATCH; 0 or 1 turns batching off).
	HoldBatch int
	// HoldLanes is how many hold transactions of idle room types run at
	// once before further holds wait and go together as a group
	// (BERTH_HOLD_LANES; 0 turns groups off; docs/adr/0033-hold-groups.md).
	HoldLanes        int
	LockTimeout      time.Duration
	StatementTimeout time.Duration
	IdleInTxTimeout  time.Duration
	SweepInterval    time.Duration
	// NoShowCutoff is the hotels' local time of day, the day after arrival,
	// after which a guest who has not checked in is marked a no-show.
	NoShowCutoff time.Duration
	MaxConns     int
	// WarmConns is how many database connections the service opens and
	// warms (the hotel and appointment hold paths' statements planned on each) before /readyz
	// reports ready, and keeps open (BERTH_DB_WARM_CONNS; 0 turns it off).
	WarmConns       int
	GuestLimits     berth.GuestLimits
	ShutdownTimeout time.Duration
	LogFormat       string
	// Payments is the payment provider (internal/paymentprovider).
	Payments paymentprovider.Config
	// telemetry adds options to telemetry.Setup (tests: an in-memory
	// span exporter). Tracing itself is configured by OTEL_* variables.
	telemetry []telemetry.Option
	// Route, when set, runs this region's router in the process
	// (BERTH_ROUTE, --route: the together layout, ADR 0022): it listens on
	// its own address and serves this region's requests through the API's
	// handler, without a socket.
	Route *routerd.Config
	// routeReady, when set, is sent the router's bound address (tests).
	routeReady chan<- string
}

func loadServeConfig(cmd *cobra.Command) (serveConfig, error) {
	var (
		c    serveConfig
		errs config.Errors
		err  error
	)
	c.Region = config.Env("BERTH_REGION", "")
	c.Addr = config.Env("BERTH_HTTP_ADDR", ":8080")
	c.DatabaseURL = config.Env("BERTH_DATABASE_URL", "")
	c.TokenSecret = config.Env("BERTH_TOKEN_SECRET", "")
	c.LogFormat = config.Env("BERTH_LOG_FORMAT", "json")
	c.TokenMaxTTL, err = auth.ParseMaxLifetime(config.Env(auth.MaxLifetimeEnvVar, ""))
	errs.Check(err)
	c.Isolation, err = postgres.ParseIsolation(config.Env("BERTH_ISOLATION", "read_committed"))
	if err != nil {
		errs.Add("BERTH_ISOLATION: %v", err)
	}
	c.HoldTTL, err = config.Duration("BERTH_HOLD_TTL", 10*time.Minute)
	errs.Check(err)
	c.OfferTTL, err = config.Duration("BERTH_WAITLIST_OFFER_TTL", 15*time.Minute)
	errs.Check(err)
	c.SoldOutTTL, err = config.Duration("BERTH_SOLDOUT_TTL", time.Second)
	errs.Check(err)
	c.HoldBatch, err = config.Int("BERTH_HOLD_BATCH", postgres.DefaultHoldBatch)
	errs.Check(err)
	c.HoldLanes, err = config.Int("BERTH_HOLD_LANES", postgres.DefaultHoldLanes)
	errs.Check(err)
	c.LockTimeout, err = config.Duration("BERTH_LOCK_TIMEOUT", 2*time.Second)
	errs.Check(err)
	c.StatementTimeout, err = config.Duration("BERTH_STATEMENT_TIMEOUT", 5*time.Second)
	errs.Check(err)
	c.IdleInTxTimeout, err = config.Duration("BERTH_IDLE_IN_TX_TIMEOUT", postgres.DefaultIdleInTxTimeout)
	errs.Check(err)
	c.SweepInterval, err = config.Duration("BERTH_SWEEP_INTERVAL", 5*time.Second)
	errs.Check(err)
	c.NoShowCutoff, err = config.Duration("BERTH_NO_SHOW_CUTOFF", 12*time.Hour)
	errs.Check(err)
	c.ShutdownTimeout, err = config.Duration("BERTH_SHUTDOWN_TIMEOUT", 20*time.Second)
	errs.Check(err)
	c.MaxConns, err = config.Int("BERTH_DB_MAX_CONNS", 32)
	errs.Check(err)
	c.WarmConns, err = config.Int("BERTH_DB_WARM_CONNS", 8)
	errs.Check(err)
	c.GuestLimits.Holds, err = config.Int("BERTH_GUEST_MAX_HOLDS", berth.DefaultGuestLimits.Holds)
	errs.Check(err)
	c.GuestLimits.Quantity, err = config.Int("BERTH_GUEST_MAX_QUANTITY", berth.DefaultGuestLimits.Quantity)
	errs.Check(err)
	c.Payments, err = paymentprovider.Load()
	errs.Check(err)
	errs.Check(c.Payments.RequireIntents())
	if f := cmd.Flags(); f != nil {
		if v, _ := f.GetString("region"); v != "" {
			c.Region = v
		}
		if v, _ := f.GetString("addr"); v != "" {
			c.Addr = v
		}
	}
	if !berth.ValidRegion(c.Region) {
		errs.Add("BERTH_REGION (--region) = %q: want one of %v", c.Region, berth.Regions())
	}
	route, err := config.Bool("BERTH_ROUTE", false)
	errs.Check(err)
	if f := cmd.Flags(); f != nil && f.Changed("route") {
		route, _ = f.GetBool("route")
	}
	if route {
		// The router's own settings (BERTH_ROUTER_ADDR, BERTH_BOOKING_URLS,
		// BERTH_READMODEL_URL, limits, waiting rooms, …) as `router serve`
		// reads them; region, database and NATS are the service's.
		rc, err := routerd.LoadEmbedded(routerd.Overrides{Region: c.Region})
		errs.Check(err)
		if rc.Addr == c.Addr {
			errs.Add("BERTH_ROUTER_ADDR = BERTH_HTTP_ADDR = %q: the router and the booking service listen apart", c.Addr)
		}
		c.Route = &rc
	}
	if c.DatabaseURL == "" {
		errs.Add("BERTH_DATABASE_URL: required")
	}
	if len(c.TokenSecret) < auth.MinSecretLen {
		errs.Add("BERTH_TOKEN_SECRET: required, at least %d bytes", auth.MinSecretLen)
	}
	if c.HoldTTL < time.Second {
		errs.Add("BERTH_HOLD_TTL: at least 1s")
	}
	if c.OfferTTL < time.Second || c.OfferTTL > 24*time.Hour {
		errs.Add("BERTH_WAITLIST_OFFER_TTL: 1s to 24h")
	}
	if c.SoldOutTTL < 0 || c.SoldOutTTL > time.Minute {
		errs.Add("BERTH_SOLDOUT_TTL: 0 (off) to 1m")
	}
	if c.HoldBatch < 0 || c.HoldBatch > 1000 {
		errs.Add("BERTH_HOLD_BATCH: 0 (off) to 1000")
	}
	if c.HoldLanes < 0 || c.HoldLanes > 1000 {
		errs.Add("BERTH_HOLD_LANES: 0 (off) to 1000")
	}
	if c.IdleInTxTimeout < time.Second {
		errs.Add("BERTH_IDLE_IN_TX_TIMEOUT: at least 1s")
	}
	if c.NoShowCutoff < 0 || c.NoShowCutoff >= 24*time.Hour {
		errs.Add("BERTH_NO_SHOW_CUTOFF: a time of day, 0s to 23h59m")
	}
	if c.SweepInterval < 100*time.Millisecond {
		errs.Add("BERTH_SWEEP_INTERVAL: at least 100ms")
	}
	if c.MaxConns < 1 {
		errs.Add("BERTH_DB_MAX_CONNS: at least 1")
	}
	if c.WarmConns < 0 || c.WarmConns > c.MaxConns {
		errs.Add("BERTH_DB_WARM_CONNS: 0 (off) to BERTH_DB_MAX_CONNS (%d)", c.MaxConns)
	}
	if c.GuestLimits.Holds < 1 {
		errs.Add("BERTH_GUEST_MAX_HOLDS: at least 1 (live holds per guest per partition)")
	}
	if c.GuestLimits.Quantity < 1 {
		errs.Add("BERTH_GUEST_MAX_QUANTITY: at least 1 (rooms or appointments per guest per partition)")
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs.Add("BERTH_LOG_FORMAT: want json or text")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs.Add("BERTH_HTTP_ADDR (--addr) = %q: want host:port, e.g. :8080", c.Addr)
	}
	if c.ShutdownTimeout < time.Second {
		errs.Add("BERTH_SHUTDOWN_TIMEOUT: at least 1s (in-flight requests need time to finish)")
	}
	for _, e := range telemetry.CheckEnv() {
		errs.Add("%s", e)
	}
	if err := errs.Err(); err != nil {
		return c, cli.Usage(err)
	}
	return c, nil
}

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the booking API of one region",
		Long: `serve runs the booking service of one region: the hotel API, the expiry
sweeper and the rolling inventory job.

Environment: BERTH_PPROF_ADDR (off; e.g. 127.0.0.1:6060: net/http/pprof on its own listener), BERTH_REGION, BERTH_HTTP_ADDR, BERTH_DATABASE_URL, BERTH_TOKEN_SECRET,
BERTH_TOKEN_MAX_TTL (24h: the longest token lifetime accepted),
BERTH_ISOLATION (read_committed|serializable), BERTH_HOLD_TTL (10m), BERTH_WAITLIST_OFFER_TTL (15m: a waitlist offer's hold),
BERTH_HOLD_BATCH (64: holds of one room type decided in one transaction; 0 off), BERTH_HOLD_LANES (2: hold transactions
of idle room types at once before more wait for a group; 0 off), BERTH_SOLDOUT_TTL (1s: how long a sold-out refusal
learnt answers later holds without the database; 0 off), BERTH_LOCK_TIMEOUT (2s), BERTH_STATEMENT_TIMEOUT (5s), BERTH_IDLE_IN_TX_TIMEOUT (60s), BERTH_SWEEP_INTERVAL (5s), BERTH_NO_SHOW_CUTOFF (12h: hotels' local time, the day after arrival),
BERTH_CLINIC_NO_SHOW_GRACE (30m: after a slot's end, a confirmed patient who has not arrived is a no-show),
BERTH_DB_MAX_CONNS (32), BERTH_DB_WARM_CONNS (8: connections opened, with the hotel and appointment holds' statements planned, before ready),
BERTH_SHUTDOWN_TIMEOUT (20s), BERTH_LOG_FORMAT (json|text),
BERTH_GUEST_MAX_HOLDS (5: live holds per guest per hotel or clinic),
BERTH_GUEST_MAX_QUANTITY (50: rooms held, or live appointments, per guest per partition).
Payments (internal/paymentprovider): BERTH_PAYMENT_PROVIDER (dev|stripe), with dev BERTH_DEV_INTENT_SECRET
(required, ≥ 32 bytes, the same for every booking service: signs the development provider's intents, ADR 0027).
BERTH_ROUTE (false; --route): also run this region's router in this process (ADR 0022),
listening on BERTH_ROUTER_ADDR (:8088) and serving this region's requests in-process,
the other regions' over BERTH_BOOKING_URLS; every other router setting is read as
'router serve --help' describes (BERTH_READMODEL_URL, BERTH_RATE_LIMITS, …).
GOGC (400 unless set: the collector's target; bound the heap with GOMEMLIMIT).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadServeConfig(cmd)
			if err != nil {
				return err
			}
			cfg.GCPercent = config.ServiceGC()
			return run(cmd.Context(), cfg, cmd.OutOrStdout(), nil)
		},
	}
	cmd.Flags().String("region", "", "region this service writes for (BERTH_REGION)")
	cmd.Flags().String("addr", "", "listen address (BERTH_HTTP_ADDR, default :8080)")
	cmd.Flags().Bool("route", false, "also run this region's router in this process, on BERTH_ROUTER_ADDR (BERTH_ROUTE)")
	return cmd
}

func newLogger(w io.Writer, format string, region string) *slog.Logger {
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, nil)
	} else {
		h = slog.NewJSONHandler(w, nil)
	}
	return slog.New(telemetry.LogHandler(h)).With("service", "booking", "region", region)
}

// run wires the service by hand and serves until ctx ends. When ready is
// not nil, the bound address is sent on it once the server listens (tests
// pass port 0).
func run(ctx context.Context, cfg serveConfig, stdout io.Writer, ready chan<- string) error {
	log := newLogger(stdout, cfg.LogFormat, cfg.Region)
	tel, flushTelemetry, err := telemetry.Setup(ctx, "booking", cfg.Region, cfg.telemetry...)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	// Flushed within the shutdown deadline below; this covers early returns.
	defer func() { _ = flushTelemetry(context.Background()) }()
	// Profiles on an ops listener of their own, off unless configured.
	if _, err := telemetry.ServePprof(ctx, config.Env(telemetry.PprofAddrEnv, ""), log); err != nil {
		return cli.Usage(err)
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{
		Isolation: cfg.Isolation, LockTimeout: cfg.LockTimeout, StatementTimeout: cfg.StatementTimeout,
		IdleInTxTimeout: cfg.IdleInTxTimeout, MaxConns: int32(cfg.MaxConns), Telemetry: tel,
		MinConns: int32(cfg.WarmConns), Warm: warmStatements(cfg),
	})
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	log.Info("database connected", "engine", db.Engine.String(), "isolation", string(cfg.Isolation))
	tokens, err := auth.New(cfg.TokenSecret, auth.WithMaxLifetime(cfg.TokenMaxTTL))
	if err != nil {
		return cli.Usage(fmt.Errorf("BERTH_TOKEN_SECRET: %w", err))
	}
	store := postgres.NewStore(db, cfg.Region, cfg.HoldTTL)
	store.SetGuestLimits(cfg.GuestLimits)
	store.SetOfferTTL(cfg.OfferTTL)
	store.SetHoldBatch(cfg.HoldBatch)
	store.SetHoldLanes(cfg.HoldLanes)
	if cfg.SoldOutTTL > 0 {
		store.UseSoldOutCache(soldout.New(cfg.SoldOutTTL, nil))
	}
	w := &wiring{cfg: cfg, db: db, store: store, log: log, tel: tel, api: httpapi.Config{
		Region: cfg.Region, Hotels: store, Stays: store, Waitlist: store, Tokens: tokens, Logger: log, Ready: db.Ping,
	}}
	defer w.close()
	// Each part of the service wires itself from its own file.
	for _, wire := range []func(context.Context, *wiring) error{wireCache, wireClinics, wireEvents, wireSearch, wirePlacements, wireWarmUp, wireTelemetry, wireWaitingRoom} {
		if err := wire(ctx, w); err != nil {
			return err
		}
	}
	api := instrument(tel, httpapi.New(w.api))
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	jobs, stopJobs := context.WithCancel(context.WithoutCancel(ctx))
	jobsDone := startJobs(jobs, store, cfg, log, w.jobs, w.runners)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "gc_percent", cfg.GCPercent)
	routeCtx, stopRoute := context.WithCancel(ctx)
	defer stopRoute()
	route, err := startRoute(routeCtx, cfg, api, ln.Addr(), stdout)
	if err != nil {
		_ = srv.Close()
		stopJobs()
		<-jobsDone
		return err
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	select {
	case err := <-errc:
		stopRoute()
		_ = route.wait()
		stopJobs()
		<-jobsDone
		return fmt.Errorf("serve: %w", err)
	case <-route.done:
		if ctx.Err() == nil {
			// The router stopped on its own: the process is not what it was
			// configured to be; stop it all rather than serve half of it.
			_ = srv.Close()
			stopJobs()
			<-jobsDone
			return fmt.Errorf("router: %w", route.err)
		}
	case <-ctx.Done():
	}
	log.Info("shutting down", "deadline", cfg.ShutdownTimeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	// Shutdown closes the listener at once (new connections are refused),
	// then waits for in-flight requests to finish; past the deadline the
	// stragglers are cut so the process exits in time.
	// The router drains at the same time (its requests for this region
	// are served in-process, by the handler, not through srv); the store
	// stays open until both are done.
	err = srv.Shutdown(shutdownCtx)
	if err != nil {
		_ = srv.Close()
	}
	if rerr := route.wait(); rerr != nil {
		log.Warn("router shutdown", "err", rerr)
	}
	stopJobs()
	select {
	case <-jobsDone:
	case <-shutdownCtx.Done():
		log.Warn("background jobs still running at the shutdown deadline")
	}
	if ferr := flushTelemetry(shutdownCtx); ferr != nil {
		log.Warn("telemetry flush", "err", ferr)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// routeRun is the region's router running in this process (BERTH_ROUTE).
type routeRun struct {
	// done closes when the router exited; nil (never ready) without one.
	done chan struct{}
	err  error // why it exited, once done is closed (nil: ctx ended and it drained)
}

// wait returns once the router (if any) exited, with its error.
func (r *routeRun) wait() error {
	if r.done == nil {
		return nil
	}
	<-r.done
	return r.err
}

// startRoute runs the region's router in this process when cfg.Route is
// set, serving this region's requests through api, and returns once it
// listens (or failed to start). It stops when ctx ends.
func startRoute(ctx context.Context, cfg serveConfig, api http.Handler, own net.Addr, stdout io.Writer) (*routeRun, error) {
	run := &routeRun{}
	if cfg.Route == nil {
		return run, nil
	}
	rc := *cfg.Route
	rc.Region, rc.Local, rc.GCPercent = cfg.Region, api, cfg.GCPercent
	// The process's global tracer and meter are the booking service's; the
	// router keeps its own registry (its /metrics) and its own spans.
	rc.Telemetry = append(append([]telemetry.Option(nil), rc.Telemetry...), telemetry.WithoutGlobals())
	rc.BookingURLs = maps.Clone(rc.BookingURLs)
	if rc.BookingURLs == nil {
		rc.BookingURLs = map[string]string{}
	}
	if rc.BookingURLs[cfg.Region] == "" {
		// Never dialled (InProcess serves it); it names this service as the
		// other regions reach it.
		rc.BookingURLs[cfg.Region] = "http://" + dialable(own)
	}
	run.done = make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		defer close(run.done)
		run.err = routerd.Run(ctx, rc, stdout, ready)
	}()
	select {
	case addr := <-ready:
		if cfg.routeReady != nil {
			cfg.routeReady <- addr
		}
		return run, nil
	case <-run.done:
		return nil, fmt.Errorf("router: %w", run.err)
	}
}

// dialable is addr with an unspecified host (":8080", "[::]:8080") made
// the loopback one.
func dialable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// job is a background task run every interval; f reports how much it did.
type job struct {
	name     string
	interval time.Duration
	f        func(context.Context) (int, error)
}

// wiring is what the optional parts of the service are wired into.
type wiring struct {
	cfg   serveConfig
	db    *postgres.DB
	store *postgres.Store
	// clinics is the clinic store (wireClinics, before wireEvents).
	clinics *postgres.ClinicStore
	log     *slog.Logger
	api     httpapi.Config
	tel     *telemetry.Telemetry
	// js is the JetStream context when BERTH_NATS_URL is set (wireEvents).
	js jetstream.JetStream
	// invalidator drops the cached reads (Redis, the sold-out cache) an
	// event of any process made stale (wireEvents); cacheReplay is how far
	// back a new per-process consumer of it replays (wireCache: the cache
	// TTL and read lag, and a margin; 0 without Redis).
	invalidator natsbus.Invalidator
	cacheReplay time.Duration
	// ready are the checks /readyz runs besides the database ping
	// (NATS, Redis: append yours in your wire function).
	ready   []readyCheck
	jobs    []job
	closers []func()
	// runners are long-running loops (the outbox relay, consumers) started
	// with the jobs and stopped on shutdown after the HTTP server drained.
	runners []func(context.Context)
}

func (w *wiring) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
}

// startJobs runs the background jobs of a booking service; the returned
// channel closes when they all stopped.
func startJobs(ctx context.Context, store *postgres.Store, cfg serveConfig, log *slog.Logger, extra []job, runners []func(context.Context)) <-chan struct{} {
	done := make(chan struct{})
	jobs := []job{
		{"expire-holds", cfg.SweepInterval, func(ctx context.Context) (int, error) {
			total := 0
			for {
				n, err := store.ExpireHolds(ctx, 200)
				total += n
				if err != nil || n < 200 {
					return total, err
				}
			}
		}},
		{"mark-no-shows", time.Minute, func(ctx context.Context) (int, error) {
			return store.MarkNoShows(ctx, time.Now(), postgres.NoShowOptions{Cutoff: cfg.NoShowCutoff})
		}},
		{"load-nights", time.Hour, func(ctx context.Context) (int, error) {
			return store.LoadDefaultNights(ctx, reservation.DateOf(time.Now().UTC()))
		}},
		{"prune-idempotency-keys", time.Hour, func(ctx context.Context) (int, error) {
			n, err := store.PruneIdempotencyKeys(ctx, 48*time.Hour, 10_000)
			return int(n), err
		}},
	}
	jobs = append(jobs, extra...)
	remaining := make(chan struct{}, len(jobs)+len(runners))
	for _, r := range runners {
		go func() {
			defer func() { remaining <- struct{}{} }()
			r(ctx)
		}()
	}
	for _, j := range jobs {
		go func() {
			defer func() { remaining <- struct{}{} }()
			postgres.Every(ctx, j.interval, func(ctx context.Context) {
				n, err := j.f(ctx)
				switch {
				case err != nil && ctx.Err() == nil:
					log.Warn("job failed", "job", j.name, "err", err)
				case n > 0:
					log.Info("job done", "job", j.name, "count", n)
				}
			})
		}()
	}
	go func() {
		for range len(jobs) + len(runners) {
			<-remaining
		}
		close(done)
	}()
	return done
}
