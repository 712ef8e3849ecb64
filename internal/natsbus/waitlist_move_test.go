package natsbus_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/nats-io/nats.go/jetstream"
)

// A room freed just before its hotel moves to another region: the new
// home's waitlist consumer reads the cancellation while the hotel is still
// homed in the old region (421: not its to apply), the hotel moves, and
// then the old home's consumer reads it (421: no longer its). Without more,
// no region offers the room and the waiter waits for the next free. The old
// home sent the event, so its consumer redrives it; the new home applies
// the copy, and the first waiter gets the room — once.
func TestWaitlistOfferSurvivesAMoveBetweenConsumers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, url := dbtest.New(t, postgres.Options{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	east := bookingtest.StartOn(t, db, url, bookingtest.Options{Region: "us-east"})
	west := bookingtest.StartOn(t, db, url, bookingtest.Options{Region: "eu-west"})
	srv := natstest.Start(t)
	nc, err := natsbus.Connect(srv.URL, "waitlist-move-test", quiet)
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
	relays, stopRelays := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, env := range []*bookingtest.Env{east, west} {
		relay := natsbus.NewRelay(js, env.Store, natsbus.RelayConfig{Region: env.Store.Region(), Poll: 10 * time.Millisecond, Log: quiet})
		wg.Go(func() { relay.Run(relays) })
	}
	t.Cleanup(func() { stopRelays(); wg.Wait() })

	// One room; a guest holds it; a waiter joins; the guest cancels.
	h := east.SeedHotel("", 1, 0, bookingtest.Date(1), bookingtest.Date(6))
	admin := east.Admin()
	stay := map[string]any{"room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(2), "check_out": bookingtest.Date(4)}
	hold := map[string]any{"guest_id": "holder", "quantity": 1}
	join := map[string]any{"guest_id": "waiter"}
	for k, v := range stay {
		hold[k], join[k] = v, v
	}
	r := east.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: bookingtest.NewKey(), Body: hold})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	held := r.JSON()["reservation_id"].(string)
	r = east.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/waitlist", Token: admin, IdemKey: bookingtest.NewKey(), Body: join})
	if r.Status != http.StatusCreated {
		t.Fatalf("join: %d %s", r.Status, r.Body)
	}
	entry := r.JSON()["entry_id"].(string)
	if r := east.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + held + "/cancel", Token: admin,
		IdemKey: bookingtest.NewKey(), Body: map[string]any{}}); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}

	// consume runs region's waitlist consumer until it has handled
	// everything sent so far.
	consume := func(env *bookingtest.Env) {
		t.Helper()
		cctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = natsbus.OfferOnFree(cctx, js, env.Store.Region(), env.Store, quiet) }()
		deadline := time.Now().Add(time.Minute)
		for !drained(ctx, t, db, js, "waitlist-"+env.Store.Region()) {
			if time.Now().After(deadline) {
				t.Fatalf("the %s waitlist consumer did not drain", env.Store.Region())
			}
			time.Sleep(25 * time.Millisecond)
		}
		stop()
		<-done
	}
	consume(west) // 421: the hotel is still homed in us-east
	if _, err := postgres.NewPlacements(db).MovePlacement(ctx, berth.KindHotel, h.ID, "eu-west"); err != nil {
		t.Fatal(err)
	}
	consume(east) // 421: the hotel is in eu-west now; us-east sent it, so it redrives
	consume(west) // the copy
	consume(east) // and once more each: nothing new
	consume(west)

	var status string
	var offers int
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT e.status,
		(SELECT count(*) FROM reservations WHERE hotel_id = e.hotel_id AND waitlist_entry_id = e.entry_id AND status = 'held')
		FROM waitlist_entries e WHERE e.entry_id = $1`, entry).Scan(&status, &offers); err != nil {
		t.Fatal(err)
	}
	if status != "offered" || offers != 1 {
		t.Fatalf("the waiter's entry is %s with %d held offers; want offered with 1 — the freed room was skipped by both regions", status, offers)
	}
	v, err := bookingtest.Violations(ctx, db, nil, postgres.HotelInvariants...)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) > 0 {
		t.Fatalf("invariants: %v", v)
	}
}

// drained reports whether every event is sent and the durable has handled
// every one it takes. The consumer is asked before and after the outbox (a
// handler that commits and acks between the two queries would leave its
// events behind), and by natstest.Drained, not by its NumPending: that
// reads zero for a moment after a publish is acknowledged and right after
// the consumer is created, which would end a region's turn before it saw
// the freeing event.
func drained(ctx context.Context, t *testing.T, db *postgres.DB, js jetstream.JetStream, durable string) bool {
	t.Helper()
	if ok, err := natstest.Drained(ctx, js, natsbus.StreamName, durable); err != nil || !ok {
		return false
	}
	var unsent int
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil || unsent > 0 {
		return false
	}
	ok, err := natstest.Drained(ctx, js, natsbus.StreamName, durable)
	return err == nil && ok
}
