package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/telemetry"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A router does not report ready before its pool's connections are open
// and have planned the placement read of a cache miss; a warm-up that
// fails (the schema not migrated yet) is logged and retried, never fatal,
// and the router becomes ready by itself once it succeeds.
func TestRouterNotReadyUntilWarmed(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	url := dbtest.NewURL(t) // empty: no tables yet
	ctx, cancel := context.WithCancel(context.Background())
	cfg := serveConfig{Region: "us-east", Addr: "127.0.0.1:0", BookingURLs: map[string]string{"us-east": "http://127.0.0.1:1"},
		DatabaseURL: url, DirectoryRefresh: time.Minute, MaxBodyBytes: 1 << 20, ShutdownTimeout: 10 * time.Second,
		LogFormat: "json", Telemetry: []telemetry.Option{telemetry.WithSyncSpanExporter(tracetest.NewInMemoryExporter()), telemetry.WithoutGlobals()}}
	logs := &syncBuffer{}
	ready, exited := make(chan string, 1), make(chan error, 1)
	go func() { exited <- run(ctx, cfg, logs, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-exited:
		t.Fatalf("run: %v\n%s", err, logs)
	}
	defer func() {
		cancel()
		if err := <-exited; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	readyz := func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for i := 0; !cond(); i++ {
			if i == 3000 {
				t.Fatalf("gave up waiting for %s\n%s", what, logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	wait("two failed warm-ups logged", func() bool {
		return strings.Count(logs.String(), "database warm-up failed; retrying") >= 2
	})
	if got := readyz(); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before the warm-up succeeded: %d, want 503", got)
	}
	select {
	case err := <-exited:
		t.Fatalf("the router exited on a failed warm-up: %v\n%s", err, logs)
	default:
	}

	// The test's own sessions carry a name of their own, to count the
	// router's apart.
	db, err := postgres.Open(context.Background(), url+"&application_name=warm-test", postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dbtest.Register(t, db, url+"&application_name=warm-test")
	if _, err := postgres.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	wait("/readyz 200 after the migrations", func() bool { return readyz() == http.StatusOK })
	if !strings.Contains(logs.String(), `"msg":"database connections warmed"`) {
		t.Errorf("no log of the warm-up's success:\n%s", logs)
	}
	// Ready means its whole pool is open (and kept open), warm.
	var open int
	if err := dbtest.SQL(db).QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name <> 'warm-test'`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open < 4 {
		t.Errorf("%d connections of the router open when it reports ready, want its pool's 4", open)
	}
}

// A router opens a few connections to every booking service it reaches
// over the network as it starts, and keeps them: a flash sale's first
// requests find them open instead of each dialling one.
func TestRouterKeepsHopConnectionsOpen(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	_, url := dbtest.New(t, postgres.Options{})
	var (
		mu      sync.Mutex
		opened  int
		idle    = map[net.Conn]bool{}
		healthz int
	)
	booking := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.URL.Path == "/healthz" {
			healthz++
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	booking.Config.ConnState = func(c net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch st {
		case http.StateNew:
			opened++
		case http.StateIdle:
			idle[c] = true
		case http.StateActive, http.StateClosed, http.StateHijacked:
			delete(idle, c)
		}
	}
	booking.Start()
	defer booking.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cfg := serveConfig{Region: "us-east", Addr: "127.0.0.1:0", BookingURLs: map[string]string{"us-east": booking.URL},
		DatabaseURL: url, DirectoryRefresh: time.Minute, MaxBodyBytes: 1 << 20, ShutdownTimeout: 10 * time.Second,
		LogFormat: "json", Telemetry: []telemetry.Option{telemetry.WithSyncSpanExporter(tracetest.NewInMemoryExporter()), telemetry.WithoutGlobals()}}
	ready, exited := make(chan string, 1), make(chan error, 1)
	go func() { exited <- run(ctx, cfg, io.Discard, ready) }()
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("run: %v", err)
	}
	defer func() {
		cancel()
		if err := <-exited; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	// 32 requests in flight together (routerd's hopWarmConns) open up to
	// 32 connections: a request answered before another starts lends it
	// its connection. A few at least are open and idle without any client.
	const want = 4
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		o, i, h := opened, len(idle), healthz
		mu.Unlock()
		if h >= 32 && i >= want {
			if o > h {
				t.Errorf("%d connections opened for %d requests: some were not used", o, h)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the booking service sees %d idle connections of the router (%d opened, %d requests), want %d", i, o, h, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
