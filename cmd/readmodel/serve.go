package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/paymentprovider"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/readmodel"
	"github.com/berthhq/berth/internal/telemetry"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// defaultWorkers is the projection's messages in hand at once
// (BERTH_READMODEL_WORKERS). Each waits in its round (ADR 0021), so it also
// bounds a round: at 16, rounds under load carried 9–10 events of the
// relays' bursts of 13–26, and a backlog was applied 16 at a time. At 64 a
// round takes what is pending, 24–29 events under the same load: a third of
// the statements, 0.80 × the read model's database CPU per hold (ADR 0028).
const defaultWorkers = 64

// maxPoolConns bounds the read model's database connections whatever the
// workers: normally the projection uses one (its round), but a failed
// round sends each of its events to apply alone, at once; past this many
// they wait for a connection instead of opening one each (PostgreSQL's
// max_connections is 100 by default, shared by every service).
const maxPoolConns = 40

// serveConfig is every setting of `readmodel serve`.
type serveConfig struct {
	// GCPercent is the collector's target in force (config.ServiceGC), logged at start.
	GCPercent       int
	Addr            string
	DatabaseURL     string
	NATSURL         string
	TokenSecret     string
	TokenMaxTTL     time.Duration
	Workers         int
	MaxDeliver      int
	ShutdownTimeout time.Duration
	LogFormat       string
	Notify          notifyConfig
	// Payments is the provider refunds go to (internal/paymentprovider).
	Payments paymentprovider.Config
	// Projector, when set, is used instead of a new one (tests observe it).
	Projector func(*postgres.ReadModel, *slog.Logger) *readmodel.Projector
	// telemetry adds options to telemetry.Setup (tests); tracing itself is
	// configured by the OTEL_* variables.
	telemetry []telemetry.Option
}

func loadServeConfig(cmd *cobra.Command) (serveConfig, error) {
	var (
		c    serveConfig
		errs config.Errors
		err  error
	)
	c.Addr = config.Env("BERTH_READMODEL_ADDR", ":8090")
	c.DatabaseURL = config.Env("BERTH_DATABASE_URL", "")
	c.NATSURL = config.Env("BERTH_NATS_URL", "")
	c.TokenSecret = config.Env("BERTH_TOKEN_SECRET", "")
	c.LogFormat = config.Env("BERTH_LOG_FORMAT", "json")
	c.TokenMaxTTL, err = auth.ParseMaxLifetime(config.Env(auth.MaxLifetimeEnvVar, ""))
	errs.Check(err)
	c.Workers, err = config.Int("BERTH_READMODEL_WORKERS", defaultWorkers)
	errs.Check(err)
	c.MaxDeliver, err = config.Int("BERTH_MAX_DELIVER", 5)
	errs.Check(err)
	c.ShutdownTimeout, err = config.Duration("BERTH_SHUTDOWN_TIMEOUT", 20*time.Second)
	errs.Check(err)
	c.Notify, err = loadNotifyConfig()
	errs.Check(err)
	c.Payments, err = paymentprovider.Load()
	errs.Check(err)
	if v, _ := cmd.Flags().GetString("addr"); v != "" {
		c.Addr = v
	}
	if c.DatabaseURL == "" {
		errs.Add("BERTH_DATABASE_URL: required")
	}
	if c.NATSURL == "" {
		errs.Add("BERTH_NATS_URL: required")
	}
	if len(c.TokenSecret) < auth.MinSecretLen {
		errs.Add("BERTH_TOKEN_SECRET: required, at least %d bytes", auth.MinSecretLen)
	}
	if c.Workers < 1 || c.Workers > 256 {
		errs.Add("BERTH_READMODEL_WORKERS: 1 to 256")
	}
	if c.MaxDeliver < 1 {
		errs.Add("BERTH_MAX_DELIVER: at least 1")
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs.Add("BERTH_LOG_FORMAT: want json or text")
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
		Short: "Consume events into the view and serve the partner API; send notifications; make refunds",
		Long: `serve runs, in one process:
  - the projection: durable consumer "readmodel" → the per-guest view (rm_reservations);
  - the partner API: GET /v1/guests/{guest_id}/reservations, /healthz, /readyz;
  - notifications: durable consumer "notify" → notify_messages, a dispatcher that sends them
    (at most once per event and channel, retried with backoff) and the reminder scan;
  - refunds: durable consumer "refunds": refund_requested → the payment provider.
Each consumer dead-letters a message to berth.dlq.<consumer>.… after BERTH_MAX_DELIVER failures.

Environment: BERTH_PPROF_ADDR (off; e.g. 127.0.0.1:6060: net/http/pprof on its own listener), BERTH_DATABASE_URL, BERTH_NATS_URL, BERTH_TOKEN_SECRET, BERTH_TOKEN_MAX_TTL (24h), BERTH_READMODEL_ADDR (:8090),
BERTH_READMODEL_WORKERS (16), BERTH_MAX_DELIVER (5), BERTH_SHUTDOWN_TIMEOUT (20s), BERTH_LOG_FORMAT,
BERTH_NOTIFY_SENDER (dev|smtp|webhook|none; dev), BERTH_NOTIFY_DIR (.local/outbox-mail),
BERTH_SMTP_ADDR, BERTH_SMTP_FROM, BERTH_SMTP_USERNAME, BERTH_SMTP_PASSWORD,
BERTH_NOTIFY_WEBHOOK_URL, BERTH_NOTIFY_WEBHOOK_SECRET, BERTH_REMINDER_INTERVAL (5m),
SMS through Twilio (when BERTH_TWILIO_ACCOUNT_SID is set): BERTH_TWILIO_AUTH_TOKEN or BERTH_TWILIO_API_KEY_SID with
BERTH_TWILIO_API_KEY_SECRET, BERTH_TWILIO_FROM or BERTH_TWILIO_MESSAGING_SERVICE_SID, BERTH_TWILIO_BASE_URL (Twilio's),
push through Firebase Cloud Messaging (when BERTH_FCM_PROJECT_ID is set): BERTH_FCM_CREDENTIALS_JSON (a service
account key; without it Google's default credentials, GOOGLE_APPLICATION_CREDENTIALS), BERTH_FCM_BASE_URL (FCM's).
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
	cmd.Flags().String("addr", "", "listen address (BERTH_READMODEL_ADDR, default :8090)")
	return cmd
}

// run wires the read model by hand and serves until ctx ends. When ready is
// not nil, the bound address is sent on it once the server listens.
func run(ctx context.Context, cfg serveConfig, stdout io.Writer, ready chan<- string) error {
	log := newLogger(stdout, cfg.LogFormat)
	tel, flushTelemetry, err := telemetry.Setup(ctx, "readmodel", "", cfg.telemetry...)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer flushWithin(flushTelemetry, 5*time.Second)
	// Profiles on an ops listener of their own, off unless configured.
	if _, err := telemetry.ServePprof(ctx, config.Env(telemetry.PprofAddrEnv, ""), log); err != nil {
		return cli.Usage(err)
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{MaxConns: int32(min(cfg.Workers*2+8, maxPoolConns)), Telemetry: tel})
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	tokens, err := auth.New(cfg.TokenSecret, auth.WithMaxLifetime(cfg.TokenMaxTTL))
	if err != nil {
		return cli.Usage(fmt.Errorf("BERTH_TOKEN_SECRET: %w", err))
	}
	nc, err := natsbus.Connect(cfg.NATSURL, "berth-readmodel", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		return err
	}
	store := postgres.NewReadModel(db)
	proj := readmodel.NewProjector(store, log)
	if cfg.Projector != nil {
		proj = cfg.Projector(store, log)
	}
	if err := observeRounds(tel, proj); err != nil {
		return err
	}
	lag := newLagProbe(js, proj)
	api := readmodel.NewServer(readmodel.ServerConfig{
		Store: store, Tokens: tokens, CursorKey: cursorKey(cfg.TokenSecret), Log: log,
		Lag: lag.get,
		Ready: func(ctx context.Context) error {
			if err := db.Ping(ctx); err != nil {
				return err
			}
			if !nc.IsConnected() {
				return errors.New("nats is not connected")
			}
			return nil
		},
	})
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler: instrument(tel, api), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 32 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Consumers stop after the HTTP server drained; each finishes the
	// messages in flight.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	start := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(bg); err != nil && bg.Err() == nil {
				log.Error("background task stopped", "task", name, "err", err)
			}
		})
	}
	start("projection", func(ctx context.Context) error {
		return natsbus.Consume(ctx, js, natsbus.ConsumerConfig{
			Durable: readmodel.ConsumerName, MaxDeliver: cfg.MaxDeliver, Workers: cfg.Workers, Log: log,
			TracerProvider: tel.TracerProvider(), Transient: postgres.IsTransient,
			// The projector reads each message itself, in one pass.
			SubjectOnly: true}, proj.Handle)
	})
	start("prune-processed", func(ctx context.Context) error {
		postgres.Every(ctx, time.Hour, func(ctx context.Context) {
			if _, err := store.PruneProcessed(ctx, 30*24*time.Hour, 10_000); err != nil && ctx.Err() == nil {
				log.Warn("prune processed events", "err", err)
			}
		})
		return nil
	})
	start("consumer-lag", func(ctx context.Context) error { recordConsumerLag(ctx, tel, js); return nil })
	if err := startNotifications(bg, cfg, db, js, log, start); err != nil {
		stopBG()
		wg.Wait()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "gc_percent", cfg.GCPercent)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	select {
	case err = <-errc:
		err = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	stopBG()
	wg.Wait()
	log.Info("stopped")
	return err
}

// cursorKey derives the cursor-signing key from the token secret, so that
// one secret serves both without one revealing the other.
func cursorKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("berth readmodel cursor key"))
	return m.Sum(nil)
}

// lagProbe answers X-Read-Model-Lag-Ms; it asks NATS for the consumer's
// pending count at most every 500ms.
type lagProbe struct {
	js      jetstream.JetStream
	proj    *readmodel.Projector
	mu      sync.Mutex
	at      time.Time
	pending atomic.Uint64
}

func newLagProbe(js jetstream.JetStream, proj *readmodel.Projector) *lagProbe {
	return &lagProbe{js: js, proj: proj}
}

func (l *lagProbe) get(ctx context.Context) time.Duration {
	l.mu.Lock()
	stale := time.Since(l.at) > 500*time.Millisecond
	if stale {
		l.at = time.Now()
	}
	l.mu.Unlock()
	if stale {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if n, err := natsbus.Pending(ctx, l.js, readmodel.ConsumerName); err == nil {
			l.pending.Store(n)
		}
		cancel()
	}
	return l.proj.Lag(l.pending.Load())
}
