package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/paymentprovider"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/routerd"
	"github.com/berthhq/berth/internal/telemetry"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// service is a booking service started by run, as `booking serve` does.
type service struct {
	*bookingtest.Env
	addr string
	// router is the URL of the region's router in the process (route).
	router string
	spans  *tracetest.InMemoryExporter
	logs   *syncBuffer
	stop   context.CancelFunc // what SIGTERM does
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startService runs the booking service of us-east on port 0 over a fresh
// database, waits until /readyz answers 200 and returns it. The service
// stops when the test ends, if the test did not stop it.
func startService(t *testing.T) *service {
	t.Helper()
	return startServiceWith(t, serviceOptions{})
}

// serviceOptions adjust startServiceWith; zero values are startService's.
type serviceOptions struct {
	natsURL  string // BERTH_NATS_URL: the outbox relay runs
	redisURL string // BERTH_REDIS_URL: the regional read cache
	// db and dbURL, when set, are the database to use instead of a fresh
	// one (a second service, or the same service started again).
	db    *postgres.DB
	dbURL string
	spans *tracetest.InMemoryExporter // where the service's spans go (a new exporter)
	// route runs the region's router in the process (BERTH_ROUTE), its
	// spans to spans as well.
	route bool
}

func startServiceWith(t *testing.T, opts serviceOptions) *service {
	t.Helper()
	// This test's service talks to its own database (and NATS, if given)
	// only: no trace export to whatever collector the shell points at.
	for _, v := range []string{"BERTH_NATS_URL", "BERTH_REDIS_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(v, "")
	}
	if opts.natsURL != "" {
		t.Setenv("BERTH_NATS_URL", opts.natsURL)
	}
	if opts.redisURL != "" {
		t.Setenv("BERTH_REDIS_URL", opts.redisURL)
	}
	db, url := opts.db, opts.dbURL
	if db == nil {
		db, url = dbtest.New(t, postgres.Options{})
	}
	spans := opts.spans
	if spans == nil {
		spans = tracetest.NewInMemoryExporter()
	}
	cfg := serveConfig{
		Region: "us-east", Addr: "127.0.0.1:0", DatabaseURL: url, TokenSecret: bookingtest.Secret, TokenMaxTTL: auth.DefaultMaxLifetime,
		Isolation: postgres.ReadCommitted, HoldTTL: 10 * time.Minute,
		// Long lock and statement timeouts: the shutdown test parks requests
		// behind a row lock on purpose.
		LockTimeout: time.Minute, StatementTimeout: time.Minute,
		SweepInterval: time.Second, MaxConns: 32, ShutdownTimeout: time.Minute, LogFormat: "json",
		GuestLimits: berth.DefaultGuestLimits,
		Payments:    paymentprovider.Config{Kind: "dev", DevIntentSecret: bookingtest.DevIntentSecret},
		telemetry:   []telemetry.Option{telemetry.WithSyncSpanExporter(spans), telemetry.WithoutGlobals()},
	}
	routeReady := make(chan string, 1)
	if opts.route {
		cfg.Route = &routerd.Config{Addr: "127.0.0.1:0", DatabaseURL: url, DirectoryRefresh: time.Minute,
			FollowMovesFor: 10 * time.Second, MaxBodyBytes: 1 << 20, ShutdownTimeout: time.Minute, LogFormat: "json",
			Telemetry: []telemetry.Option{telemetry.WithSyncSpanExporter(spans)}}
		cfg.routeReady = routeReady
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{spans: spans, logs: &syncBuffer{}, stop: cancel, exited: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() { s.exited <- run(ctx, cfg, s.logs, ready) }()
	select {
	case s.addr = <-ready:
	case err := <-s.exited:
		t.Fatalf("run: %v\n%s", err, s.logs)
	}
	if opts.route {
		s.router = "http://" + <-routeReady
	}
	t.Cleanup(func() {
		cancel()
		if err := <-s.exited; err != nil {
			t.Errorf("run returned %v", err)
		}
	})
	tokens, err := auth.New(bookingtest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	t.Cleanup(tr.CloseIdleConnections)
	s.Env = &bookingtest.Env{T: t, URL: "http://" + s.addr, DB: db, DBURL: url,
		Store: postgres.NewStore(db, "us-east", 10*time.Minute), Tokens: tokens, Payments: bookingtest.NewDevPayments(t, db),
		Client: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
	for i := 0; ; i++ {
		r, err := s.Try(context.Background(), bookingtest.Request{Method: "GET", Path: "/readyz"})
		if err == nil && r.Status == http.StatusOK {
			break
		}
		if i == 500 {
			t.Fatalf("/readyz never answered 200: %v %v", r.Status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

func (s *service) hold(ctx context.Context, h bookingtest.Hotel, guest, key string) (bookingtest.Response, error) {
	return holdVia(ctx, s.Env, h, guest, key)
}

// holdVia sends a hold of h's room type for guest to env (a booking
// service or a router).
func holdVia(ctx context.Context, env *bookingtest.Env, h bookingtest.Hotel, guest, key string) (bookingtest.Response, error) {
	return env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
		Token: env.Token(guest, berth.RoleGuest), IdemKey: key,
		Body: map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(30), "check_out": bookingtest.Date(32), "quantity": 1}})
}

// /metrics of a running booking service carries Berth's named series after
// a few requests.
func TestMetrics(t *testing.T) {
	s := startService(t)
	h := s.SeedHotel("", 1, 0, bookingtest.Date(0), bookingtest.Date(60))
	for i, want := range []int{http.StatusCreated, http.StatusConflict} {
		r, err := s.hold(context.Background(), h, fmt.Sprintf("g%d", i), bookingtest.NewKey())
		if err != nil || r.Status != want {
			t.Fatalf("hold %d: %d %s %v", i, r.Status, r.Body, err)
		}
	}
	r := s.Do(bookingtest.Request{Method: "GET", Path: "/metrics"})
	if r.Status != http.StatusOK {
		t.Fatalf("/metrics: %d", r.Status)
	}
	text := string(r.Body)
	for _, want := range []struct {
		name   string
		labels []string
	}{
		{"berth_booking_outcomes_total", []string{`op="hotel.hold"`, `code="ok"`, `region="us-east"`}},
		{"berth_booking_outcomes_total", []string{`op="hotel.hold"`, `code="sold_out"`, `region="us-east"`}},
		{"http_server_request_duration_seconds_count", []string{`http_route="/v1/hotels/{hotel_id}/reservations"`,
			`http_request_method="POST"`, `http_response_status_code="201"`, `region="us-east"`}},
		{"http_server_request_duration_seconds_bucket", []string{`http_response_status_code="409"`}},
		{"berth_tx_retries_total", []string{`reason="40001"`, `region="us-east"`}},
		{"berth_db_pool_acquired_conns", []string{`region="us-east"`}},
		{"berth_db_pool_idle_conns", nil},
		{"berth_db_pool_total_conns", nil},
		{"berth_db_pool_max_conns", []string{"} 32"}},
		{"berth_db_pool_empty_acquire_total", nil},
		{"berth_db_pool_acquires_total", nil},
		{"berth_db_pool_acquire_wait_seconds_total", nil},
		// No relay runs here, so the hold's event waits in the outbox.
		{"berth_outbox_backlog", []string{`region="us-east"`}},
		{"berth_outbox_oldest_age_seconds", []string{`region="us-east"`}},
		{"db_client_operation_duration_seconds_count", nil},
		{"berth_hold_batches_total", []string{`region="us-east"`}},
		{"berth_hold_batched_total", nil},
		{"berth_hold_batch_alone_total", nil},
		{"berth_hold_batch_reruns_total", nil},
		{"berth_hold_batch_phase_seconds_total", []string{`phase="lock"`, `region="us-east"`}},
		{"berth_hold_batch_phase_seconds_total", []string{`phase="decide"`}},
		{"berth_hold_batch_phase_seconds_total", []string{`phase="commit"`}},
	} {
		if !hasSeries(text, want.name, want.labels...) {
			t.Errorf("no series %s%v on /metrics", want.name, want.labels)
		}
	}
	if hasSeries(text, "berth_outbox_backlog", "} 0") {
		t.Errorf("outbox backlog is 0 after a hold with no relay running")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

func hasSeries(text, name string, labels ...string) bool {
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			return true
		}
	}
	return false
}

// One booking request is one trace: the caller's trace id (traceparent)
// continues into the HTTP server span, and every query of the request is a
// database span beneath it.
func TestTraceOfOneBooking(t *testing.T) {
	s := startService(t)
	h := s.SeedHotel("", 5, 0, bookingtest.Date(0), bookingtest.Date(60))
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	r, err := s.Try(context.Background(), bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
		Token: s.Token("g1", berth.RoleGuest), IdemKey: bookingtest.NewKey(),
		Header: map[string]string{"traceparent": "00-" + traceID.String() + "-00f067aa0ba902b7-01"},
		Body: map[string]any{"guest_id": "g1", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(30), "check_out": bookingtest.Date(32), "quantity": 1}})
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s %v", r.Status, r.Body, err)
	}
	// The server span ends just after the answer was written: wait for it.
	var server *tracetest.SpanStub
	for i := 0; server == nil; i++ {
		for _, sp := range s.spans.GetSpans() {
			if sp.SpanKind == trace.SpanKindServer && sp.SpanContext.TraceID() == traceID {
				server = &sp
			}
		}
		if i == 500 {
			t.Fatal("no server span in the caller's trace")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if server.Name != "POST /v1/hotels/{hotel_id}/reservations" {
		t.Errorf("server span %q", server.Name)
	}
	if server.Parent.SpanID().String() != "00f067aa0ba902b7" || !server.Parent.IsRemote() {
		t.Errorf("server span's parent is %v, want the caller's span", server.Parent)
	}
	// Every span of the trace must lead up to the server span.
	byID := map[trace.SpanID]tracetest.SpanStub{}
	var db []tracetest.SpanStub
	for _, sp := range s.spans.GetSpans() {
		if sp.SpanContext.TraceID() != traceID {
			continue
		}
		byID[sp.SpanContext.SpanID()] = sp
		for _, a := range sp.Attributes {
			if a.Key == "db.system" && a.Value.AsString() == "postgresql" {
				db = append(db, sp)
			}
		}
	}
	var statements []string
	for _, sp := range db {
		p := sp
		for p.SpanContext.SpanID() != server.SpanContext.SpanID() {
			next, ok := byID[p.Parent.SpanID()]
			if !ok {
				t.Fatalf("database span %q is not under the server span", sp.Name)
			}
			p = next
		}
		for _, a := range sp.Attributes {
			if a.Key == "db.query.text" {
				statements = append(statements, a.Value.AsString())
			}
		}
	}
	joined := strings.Join(statements, "\n")
	for _, want := range []string{"UPDATE room_inventory", "INSERT INTO outbox"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no database span ran %q; statements traced:\n%s", want, joined)
		}
	}
}

// SIGTERM during a burst of holds: the requests in flight finish with a
// complete answer, the service exits cleanly, and every 201 is in the
// database with its outbox event.
//
// To have requests provably in flight when the signal comes, the test
// holds a lock on the hotel's inventory rows: every hold of the burst
// waits on it inside the database. Only after the service has stopped
// accepting connections is the lock released. The burst goes to the
// booking service's own listener, and — with the region's router in the
// process (BERTH_ROUTE) — to the router's, whose requests are served
// in-process: both drain before the process exits.
func TestShutdownDuringBurst(t *testing.T) {
	t.Run("booking listener", func(t *testing.T) { shutdownDuringBurst(t, false) })
	t.Run("in-process router", func(t *testing.T) { shutdownDuringBurst(t, true) })
}

func shutdownDuringBurst(t *testing.T, viaRouter bool) {
	s := startServiceWith(t, serviceOptions{route: viaRouter})
	h := s.SeedHotel("", 20, 0, bookingtest.Date(0), bookingtest.Date(60))
	ctx := context.Background()
	// target is where the burst goes: the service, or its router.
	target, addr := s.Env, s.addr
	if viaRouter {
		target = &bookingtest.Env{T: t, URL: s.router, Tokens: s.Tokens, Client: s.Client}
		addr = strings.TrimPrefix(s.router, "http://")
	}

	locker, err := pgx.Connect(ctx, s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	lockTx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockTx.Exec(ctx, "SELECT 1 FROM room_inventory WHERE hotel_id = $1 FOR UPDATE", h.ID); err != nil {
		t.Fatal(err)
	}

	const workers, perWorker = 12, 5
	type result struct {
		key      string
		status   int
		code     string
		body     []byte
		sendErr  error // no answer at all
		readErr  error // an answer cut off mid-body
		inFlight bool  // sent before the shutdown began
	}
	results := make([][]result, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				res := result{key: bookingtest.NewKey(), inFlight: i == 0}
				guest := fmt.Sprintf("g%d-%d", w, i)
				r, err := holdVia(ctx, target, h, guest, res.key)
				switch {
				case err != nil && isBodyError(err):
					res.readErr = err
				case err != nil:
					res.sendErr = err
				default:
					res.status, res.code, res.body = r.Status, r.Code(), r.Body
				}
				results[w] = append(results[w], res)
				if err != nil {
					return // the service is gone: stop, like a client would
				}
			}
		})
	}

	// Every worker's first hold is waiting on the lock, inside the service.
	waitFor(t, "all first holds to wait on the row lock", func() bool {
		var n int
		err := dbtest.SQL(s.DB).QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n >= workers
	})
	s.stop() // SIGTERM
	waitFor(t, "the listener to close", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	})
	if err := lockTx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := <-s.exited; err != nil {
		t.Fatalf("run after SIGTERM: %v", err)
	}
	s.exited <- nil // for the cleanup

	created := map[string]string{} // reservation id → idempotency key
	counts := map[string]int{}
	for _, rs := range results {
		for _, r := range rs {
			switch {
			case r.readErr != nil:
				t.Errorf("hold %s: answer cut off mid-response: %v", r.key, r.readErr)
				counts["cut off"]++
			case r.sendErr != nil:
				if r.inFlight {
					t.Errorf("hold %s was in flight at SIGTERM and got no answer: %v", r.key, r.sendErr)
				}
				// Never accepted: it must have left no trace.
				var n int
				if err := dbtest.SQL(s.DB).QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE idem_key = $1", r.key).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("hold %s got no answer (%v) but was processed", r.key, r.sendErr)
				}
				if errors.Is(r.sendErr, syscall.ECONNREFUSED) {
					counts["refused"]++
				} else {
					counts["no answer: "+r.sendErr.Error()]++
				}
			case r.status == http.StatusCreated:
				counts["201"]++
				id, _ := bookingtest.Response{Body: r.body}.JSON()["reservation_id"].(string)
				created[id] = r.key
			case r.status == http.StatusConflict && r.code == "sold_out":
				counts["409 sold_out"]++
			default:
				t.Errorf("hold %s: %d %s", r.key, r.status, r.body)
			}
		}
	}
	t.Logf("outcomes: %v", counts)
	if counts["201"]+counts["409 sold_out"] < workers {
		t.Errorf("%d complete answers, want at least the %d in flight at SIGTERM", counts["201"]+counts["409 sold_out"], workers)
	}
	// No event lost: each 201 is a held reservation with its outbox row, and
	// the inventory counts exactly those.
	for id := range created {
		var status string
		var events int
		err := dbtest.SQL(s.DB).QueryRow(ctx, `SELECT r.status, (SELECT count(*) FROM outbox o WHERE o.partition_id = r.hotel_id AND o.aggregate_id = r.reservation_id)
			FROM reservations r WHERE r.hotel_id = $1 AND r.reservation_id = $2`, h.ID, id).Scan(&status, &events)
		if err != nil {
			t.Errorf("reservation %s answered 201 but is not in the database: %v", id, err)
			continue
		}
		if status != "held" || events == 0 {
			t.Errorf("reservation %s: status %s, %d outbox events", id, status, events)
		}
	}
	rows, err := dbtest.SQL(s.DB).Query(ctx, "SELECT night::text, reserved FROM room_inventory WHERE hotel_id = $1 AND reserved > 0", h.ID)
	if err != nil {
		t.Fatal(err)
	}
	nights, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (int, error) {
		var night string
		var reserved int
		err := r.Scan(&night, &reserved)
		return reserved, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(nights) != 2 {
		t.Errorf("%d nights reserved, want 2", len(nights))
	}
	for _, reserved := range nights {
		if reserved != len(created) {
			t.Errorf("a night has %d rooms reserved for %d answered holds", reserved, len(created))
		}
	}
}

// isBodyError tells an answer cut off while its body was read from a
// request that got no answer at all: bookingtest.Env.Try returns both, the
// latter as the *url.Error of http.Client.Do.
func isBodyError(err error) bool {
	var ue *url.Error
	return !errors.As(err, &ue)
}

// waitFor polls cond until it holds (bounded, so a broken service fails
// the test instead of hanging it).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 3000 {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A bad setting stops the start with a usage error naming the variable.
func TestConfigNamesTheVariable(t *testing.T) {
	for v, val := range map[string]string{
		"BERTH_REGION": "us-east", "BERTH_DATABASE_URL": "postgres://x/y", "BERTH_TOKEN_SECRET": bookingtest.Secret,
		"BERTH_SHUTDOWN_TIMEOUT": "10ms", "BERTH_HTTP_ADDR": "8080",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318", "OTEL_TRACES_SAMPLER": "sometimes",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "BERTH_GUEST_MAX_HOLDS": "0", "BERTH_GUEST_MAX_QUANTITY": "many",
		"BERTH_HOLD_BATCH": "-1", "BERTH_HOLD_LANES": "-2", "BERTH_DB_WARM_CONNS": "33", "BERTH_PAYMENT_PROVIDER": "",
		"BERTH_DEV_INTENT_SECRET": "",
	} {
		t.Setenv(v, val)
	}
	_, err := loadServeConfig(newServeCmd())
	if err == nil {
		t.Fatal("no error")
	}
	if cli.ExitCode(err) != 2 {
		t.Errorf("exit code %d, want 2", cli.ExitCode(err))
	}
	for _, want := range []string{"BERTH_SHUTDOWN_TIMEOUT", "BERTH_HTTP_ADDR", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "BERTH_GUEST_MAX_HOLDS", "BERTH_GUEST_MAX_QUANTITY", "BERTH_HOLD_BATCH", "BERTH_HOLD_LANES",
		"BERTH_DB_WARM_CONNS", "BERTH_DEV_INTENT_SECRET"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
	for _, clean := range []string{"BERTH_REGION", "BERTH_DATABASE_URL", "BERTH_TOKEN_SECRET"} {
		if strings.Contains(err.Error(), clean) {
			t.Errorf("error names %s, which is valid:\n%v", clean, err)
		}
	}
}
