package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/paymentprovider"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/telemetry"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A booking service does not report ready before its database connections
// are warm, and a warm-up that fails — here the schema is not migrated
// yet, as when a service starts before its migrations ran — is logged and
// retried, never fatal: the service keeps running, not ready, and becomes
// ready by itself once the warm-up succeeds.
func TestNotReadyUntilWarmed(t *testing.T) {
	t.Setenv("BERTH_NATS_URL", "")
	t.Setenv("BERTH_REDIS_URL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	url := dbtest.NewURL(t) // empty: no tables yet
	const conns = 4
	cfg := serveConfig{
		Region: "us-east", Addr: "127.0.0.1:0", DatabaseURL: url, TokenSecret: bookingtest.Secret, TokenMaxTTL: auth.DefaultMaxLifetime,
		Isolation: postgres.ReadCommitted, HoldTTL: 10 * time.Minute, LockTimeout: time.Second, StatementTimeout: 10 * time.Second,
		SweepInterval: time.Second, MaxConns: 8, WarmConns: conns, ShutdownTimeout: 10 * time.Second, LogFormat: "json",
		GuestLimits: berth.DefaultGuestLimits,
		Payments:    paymentprovider.Config{Kind: "dev", DevIntentSecret: bookingtest.DevIntentSecret},
		telemetry:   []telemetry.Option{telemetry.WithSyncSpanExporter(tracetest.NewInMemoryExporter()), telemetry.WithoutGlobals()},
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs, exited, ready := &syncBuffer{}, make(chan error, 1), make(chan string, 1)
	go func() { exited <- run(ctx, cfg, logs, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-exited:
		t.Fatalf("run: %v\n%s", err, logs)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-exited; err != nil {
			t.Errorf("run returned %v", err)
		}
	})
	readyz := func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// Not ready while the warm-up fails; it is retried, and the service
	// does not exit.
	waitFor(t, "two failed warm-ups logged", func() bool {
		return strings.Count(logs.String(), "database warm-up failed; retrying") >= 2
	})
	if got := readyz(); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before the warm-up succeeded: %d, want 503", got)
	}
	if !strings.Contains(logs.String(), "database warm-up: connections not warmed yet") {
		t.Errorf("the not-ready log does not name the warm-up:\n%s", logs)
	}
	select {
	case err := <-exited:
		t.Fatalf("the service exited on a failed warm-up: %v\n%s", err, logs)
	default:
	}

	// The migrations run: the next attempt succeeds, and the service
	// reports ready with its connections open.
	db, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dbtest.Register(t, db, url)
	if _, err := postgres.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/readyz 200 after the migrations", func() bool { return readyz() == http.StatusOK })
	if !strings.Contains(logs.String(), `"msg":"database connections warmed"`) || !strings.Contains(logs.String(), `"conns":4`) {
		t.Errorf("no log of the warm-up's success with its 4 connections:\n%s", logs)
	}
	// It keeps them open (its pool's minimum).
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var open int
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "berth_db_pool_total_conns{") {
			open, _ = strconv.Atoi(line[strings.LastIndex(line, " ")+1:])
		}
	}
	if open < conns {
		t.Errorf("the pool has %d connections open after warming %d", open, conns)
	}
}
