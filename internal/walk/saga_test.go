package walk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/walk"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fault is where a run of the saga is killed: the consumer dies before or
// after a step's transaction (the message is not acked either way; the
// relay and the consumer are started again and the message comes back to
// the new consumer), the relay and the broker go down between steps, or the resumer
// sends the request again while the first is in flight.
type fault struct {
	name string
	// step is the message type whose first delivery is killed ("" none).
	step  string
	after bool // killed after the step's transaction committed
	// outage: the relay and consumer are down and the broker restarts
	// between the relocation and the first step.
	outage bool
	// resume: ResumeWalks re-sends the request before anything runs.
	resume bool
	// full: the sister hotel has no room, so the walk is undone.
	full bool
}

var faults = []fault{
	{name: "no fault"},
	{name: "consumer dies before the hold", step: "walk.requested"},
	{name: "consumer dies after the hold, before its ack", step: "walk.requested", after: true},
	{name: "consumer dies before the walked step", step: "walk.held"},
	{name: "consumer dies after the walked step, before its ack", step: "walk.held", after: true},
	{name: "relay and broker down after the relocation", outage: true},
	{name: "resumer re-sends the request", resume: true},
	{name: "sister full, consumer dies before the undo", step: "walk.refused", full: true},
	{name: "sister full, consumer dies after the undo, before its ack", step: "walk.refused", after: true, full: true},
	{name: "sister full, resumer re-sends", resume: true, full: true},
}

// A relocation saga killed at each step, with every one of its messages
// then delivered once more (as a relay that lost its dedup window would):
// the guest ends with exactly one live stay — the sister hotel's, linked to
// the walked original, or the original confirmed again when the sister was
// full — and the database passes the hotel invariants, walks included.
// The relay, the broker and the consumer are the real ones (an in-process
// NATS server with JetStream).
func TestRelocationSagaUnderFaults(t *testing.T) {
	t.Parallel()
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			runSaga(t, f)
		})
	}
}

type harness struct {
	t   *testing.T
	env *bookingtest.Env
	js  jetstream.JetStream
	nc  *nats.Conn
	srv *natstest.Server
	log *slog.Logger

	mu    sync.Mutex
	stops []func()
	// restarts counts restarts in flight (killOnce's), which the end of
	// the test waits for before stopping everything.
	restarts sync.WaitGroup
}

// start runs the region's relay and the saga's consumer (handler h) until
// stop is called.
func (h *harness) start(handler natsbus.Handler) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	relay := natsbus.NewRelay(h.js, h.env.Store, natsbus.RelayConfig{Region: h.env.Store.Region(), Poll: 10 * time.Millisecond, Log: h.log})
	wg.Go(func() { relay.Run(ctx) })
	cfg := walk.ConsumerConfig(h.env.Store.Region(), postgres.IsTransient, h.log)
	cfg.Retry = func(uint64) time.Duration { return 50 * time.Millisecond }
	cfg.MaxDeliver = 20
	wg.Go(func() { _ = natsbus.Consume(ctx, h.js, cfg, handler) })
	h.stops = append(h.stops, func() { cancel(); wg.Wait() })
}

func (h *harness) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.stops {
		s()
	}
	h.stops = nil
}

// killOnce kills the first delivery of messages of type step: before the
// step runs, or after it committed — either way the message is not acked —
// and then restarts the region's relay and consumer (a new consumer
// instance on the same durable gets the message again), as a booking
// service killed there and started again would.
func (h *harness) killOnce(f fault, inner natsbus.Handler, killed *atomic.Bool) natsbus.Handler {
	var handler natsbus.Handler
	handler = func(ctx context.Context, m natsbus.Message) error {
		if f.step == "" || m.Event.Type != f.step || !killed.CompareAndSwap(false, true) {
			return inner(ctx, m)
		}
		if f.after {
			if err := inner(ctx, m); err != nil {
				return err
			}
		}
		h.restarts.Add(1)
		go func() {
			defer h.restarts.Done()
			h.stop()
			h.start(handler)
		}()
		return errors.New("killed: the consumer died before acking")
	}
	return handler
}

func runSaga(t *testing.T, f fault) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := bookingtest.Start(t, bookingtest.Options{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := natstest.Start(t)
	nc, err := natsbus.Connect(srv.URL, "saga-test", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsbus.EnsureStream(ctx, js); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, env: env, js: js, nc: nc, srv: srv, log: quiet}
	t.Cleanup(h.stop)

	hotel, sister, guest, stay := seedWalk(t, env, f.full)
	saga := walk.New(env.Store, quiet)
	var killed atomic.Bool
	if !f.outage {
		h.start(h.killOnce(f, saga.Handle, &killed))
	}
	key := bookingtest.NewKey()
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + hotel + "/reservations/" + stay + "/relocate",
		Token: env.Admin(), IdemKey: key, Body: map[string]any{"hotel_id": sister}})
	if r.Status != http.StatusAccepted {
		t.Fatalf("relocate: %d %s", r.Status, r.Body)
	}
	walkID := r.JSON()["walk"].(map[string]any)["reservation_id"].(string)
	if f.resume {
		// Backdate the walk so the resumer takes it at once.
		if _, err := dbtest.SQL(env.DB).Exec(ctx, `UPDATE reservations SET updated_at = now() - INTERVAL '1 hour'
			WHERE reservation_id = $1`, stay); err != nil {
			t.Fatal(err)
		}
		if n, err := env.Store.ResumeWalks(ctx, time.Minute, 10); err != nil || n > 1 {
			t.Fatalf("resume: %d, %v", n, err)
		}
	}
	if f.outage {
		srv.Restart()
		h.start(h.killOnce(f, saga.Handle, &killed))
	}
	want := "walked"
	if f.full {
		want = "confirmed"
	}
	waitFor(ctx, t, "the saga to settle", func() bool {
		var status string
		err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT status FROM reservations WHERE reservation_id = $1`, stay).Scan(&status)
		return err == nil && status == want && settled(ctx, env.DB, js, "walks-"+env.Store.Region())
	})
	// A replay of the relocation's request answers the same and starts
	// nothing new.
	if again := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + hotel + "/reservations/" + stay + "/relocate",
		Token: env.Admin(), IdemKey: key, Body: map[string]any{"hotel_id": sister}}); again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed relocation: %d %s", again.Status, again.Body)
	}
	// Every walk message once more, under a fresh message id.
	replays := republishWalkEvents(ctx, t, env, js)
	waitFor(ctx, t, "the replays to be handled", func() bool { return idle(ctx, js, "walks-"+env.Store.Region()) })
	h.restarts.Wait()
	h.stop()
	if f.step != "" && !killed.Load() {
		t.Fatalf("no %s message was killed: the fault never happened", f.step)
	}

	var live, relocated, outcomes int
	var status string
	err = dbtest.SQL(env.DB).QueryRow(ctx, `SELECT
		(SELECT count(*) FROM reservations WHERE guest_id = $1 AND status IN ('held', 'confirmed', 'checked_in', 'walking')),
		(SELECT count(*) FROM reservations WHERE relocated_from_reservation_id = $2),
		(SELECT count(*) FROM walk_outcomes WHERE walk_id = $3),
		(SELECT status FROM reservations WHERE reservation_id = $2)`, guest, stay, walkID).Scan(&live, &relocated, &outcomes, &status)
	if err != nil {
		t.Fatal(err)
	}
	wantRelocated := 1
	if f.full {
		wantRelocated = 0
	}
	if live != 1 || relocated != wantRelocated || outcomes != 1 || status != want {
		t.Fatalf("after %d replays: %d live stays, %d relocated, %d walk outcomes, original %s; want 1, %d, 1, %s",
			replays, live, relocated, outcomes, status, wantRelocated, want)
	}
	// The hotel invariants, and every confirmed stay's event (the
	// relocated stay's is reservation.relocated).
	v, err := bookingtest.Violations(ctx, env.DB, nil, append(postgres.HotelInvariants, postgres.CheckReservationEvent)...)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) > 0 {
		t.Fatalf("invariants: %v", v)
	}
}

// seedWalk makes a hotel of a chain whose only room is taken, a confirmed
// guest arriving today, and a sister hotel of the chain in the same city
// (with no room left when full).
func seedWalk(t *testing.T, env *bookingtest.Env, full bool) (hotel, sister, guest, stay string) {
	t.Helper()
	admin := env.Admin()
	h := env.SeedHotel("", 2, 0, bookingtest.Date(-1), bookingtest.Date(10))
	if r := env.Do(bookingtest.Request{Method: "PATCH", Path: "/v1/hotels/" + h.ID, Token: admin, Body: map[string]any{"chain": "Acme"}}); r.Status != http.StatusOK {
		t.Fatalf("chain: %d %s", r.Status, r.Body)
	}
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels", Token: admin, Body: map[string]any{
		"name": "Sister", "city": "Munich", "country": "DE", "timezone": "Europe/Berlin", "home_region": env.Store.Region(), "chain": "Acme"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("sister: %d %s", r.Status, r.Body)
	}
	sister = r.JSON()["hotel_id"].(string)
	r = env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + sister + "/room-types", Token: admin, Body: map[string]any{
		"name": "Double", "max_guests": 2, "price_cents": 9000, "currency": "EUR", "overbooking_pct": 0}})
	if r.Status != http.StatusCreated {
		t.Fatalf("sister room type: %d %s", r.Status, r.Body)
	}
	total := 3
	if full {
		total = 0
	}
	r = env.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + sister + "/room-types/" + r.JSON()["room_type_id"].(string) + "/inventory",
		Token: admin, Body: map[string]any{"from": bookingtest.Date(-1), "to": bookingtest.Date(10), "total_rooms": total}})
	if r.Status != http.StatusOK {
		t.Fatalf("sister inventory: %d %s", r.Status, r.Body)
	}
	guest = "walker-" + uuid.NewString()[:8]
	r = env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(0), "check_out": bookingtest.Date(2), "quantity": 1}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	stay = r.JSON()["reservation_id"].(string)
	if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + stay + "/confirm", Token: admin,
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "desk"}}); r.Status != http.StatusOK {
		t.Fatalf("confirm: %d %s", r.Status, r.Body)
	}
	return h.ID, sister, guest, stay
}

// republishWalkEvents publishes every walk event of the outbox again under
// a new message id, and returns how many.
func republishWalkEvents(ctx context.Context, t *testing.T, env *bookingtest.Env, js jetstream.JetStream) int {
	t.Helper()
	rows, err := dbtest.SQL(env.DB).Query(ctx, `SELECT kind, partition_id::TEXT, event_type, event_id::TEXT FROM outbox
		WHERE event_type LIKE 'walk.%' ORDER BY created_at, seq`)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct{ kind, partition, typ, id string }
	var evs []ev
	for rows.Next() {
		var e ev
		if err := rows.Scan(&e.kind, &e.partition, &e.typ, &e.id); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	rows.Close()
	if len(evs) < 2 {
		t.Fatalf("only %d walk events in the outbox", len(evs))
	}
	for _, e := range evs {
		subject := fmt.Sprintf("berth.%s.%s.%s", e.kind, e.partition, e.typ)
		// The stream keeps the first publication; fetch it and send its
		// bytes again under a new id.
		msg, err := lastOf(ctx, js, subject, e.id)
		if err != nil {
			t.Fatal(err)
		}
		out := nats.NewMsg(subject)
		out.Data = msg
		out.Header.Set("Nats-Msg-Id", "replay-"+e.id)
		if _, err := js.PublishMsg(ctx, out); err != nil {
			t.Fatal(err)
		}
	}
	return len(evs)
}

// lastOf finds the stored message of event id on subject.
func lastOf(ctx context.Context, js jetstream.JetStream, subject, id string) ([]byte, error) {
	s, err := js.Stream(ctx, natsbus.StreamName)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if m.Subject == subject && m.Header.Get("Nats-Msg-Id") == id {
			return m.Data, nil
		}
	}
	return nil, fmt.Errorf("event %s not in the stream", id)
}

// idle reports whether the consumer has acked every walk message stored in
// the stream. Its own counts cannot tell: NumPending and NumAckPending read
// zero for a moment both after a publish is acknowledged (the server tells
// its consumers afterwards) and right after the consumer is created (before
// it counts the stream), so a region could be declared idle before it ever
// saw a message — and handle it after the test moved on (natstest.Drained).
func idle(ctx context.Context, js jetstream.JetStream, durable string) bool {
	ok, err := natstest.Drained(ctx, js, natsbus.StreamName, durable)
	return err == nil && ok
}

// settled reports whether every walk message is sent and every one of the
// durables has handled all of them. The consumers are asked before and
// after the outbox: a handler that commits its answer to the outbox and
// acks between the outbox query and the consumers' would otherwise leave
// that answer unsent, and unhandled, behind a "settled".
func settled(ctx context.Context, db *postgres.DB, js jetstream.JetStream, durables ...string) bool {
	for _, d := range durables {
		if !idle(ctx, js, d) {
			return false
		}
	}
	var unsent int
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND event_type LIKE 'walk.%'`).
		Scan(&unsent); err != nil || unsent > 0 {
		return false
	}
	for _, d := range durables {
		if !idle(ctx, js, d) {
			return false
		}
	}
	return true
}

func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(25 * time.Millisecond):
		}
	}
}
