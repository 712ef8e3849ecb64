package postgres_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/soldout"
	"github.com/google/uuid"
)

// warmed is what a booking service warms its pool with (a prepaid hold's
// intent with the development provider sends no statement: ADR 0027).
func warmed() []string { return postgres.HoldStatements() }

// The warm-up plans what the hold path sends: a hold that wins, one the
// database refuses, one the sold-out cache refuses (its key read), a batch
// of holds of one room type, a group of holds of idle room types with a
// retry in it, the payment intent of a prepaid hold. A new
// statement on that path fails this test until HoldStatements names it.
func TestWarmCoversTheHoldPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &dbtest.TripRecorder{}
	env := bookingtest.Start(t, bookingtest.Options{DB: postgres.Options{Tracer: rec}})
	one := env.SeedHotel("", 1, 0, bookingtest.Date(1), bookingtest.Date(5))
	many := env.SeedHotel("", 20, 0, bookingtest.Date(1), bookingtest.Date(5))
	in, _ := reservation.ParseDate(bookingtest.Date(2))
	stay := reservation.Stay{CheckIn: in, CheckOut: in.AddDays(2)}
	holdKey := func(s *postgres.Store, h bookingtest.Hotel, key string) berth.Response {
		t.Helper()
		resp, err := s.Hold(ctx, reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID,
			GuestID: "g-" + uuid.NewString(), Stay: stay, Quantity: 1}, &berth.Idem{Key: key, Hash: "h", Render: renderAnswer})
		if err != nil {
			t.Errorf("hold: %v", err)
		}
		return resp
	}
	hold := func(s *postgres.Store, h bookingtest.Hotel) berth.Response { return holdKey(s, h, uuid.NewString()) }
	cached := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
	cached.UseSoldOutCache(soldout.New(time.Minute, time.Now))
	cached.SetHoldBatch(postgres.DefaultHoldBatch)
	plain := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
	plain.SetHoldBatch(0)

	// A replay queued in a batch (below): its key answered first, and a
	// night of its room type locked, so that the holds queue behind it.
	replayed := env.SeedHotel("", 20, 0, bookingtest.Date(1), bookingtest.Date(5))
	replayKey := uuid.NewString()
	if r := holdKey(cached, replayed, replayKey); r.Status != http.StatusCreated {
		t.Fatalf("the hold replayed below: %d %s", r.Status, r.Body)
	}
	lock := lockNight(t, env, replayed, 2)

	// A group's hotels, and the retried request's first time (below).
	grouping := oneLaneStore(env, time.Hour) // sendWhileLaneBusy lets the lane go
	gh := seedHotels(env, 4, 5)
	retryKey, retry := uuid.NewString(), holdOf(t, gh[3], "retrier", 5, 2, 1)
	if a := doHold(grouping, retry, retryKey, "h"); a.status != http.StatusCreated {
		t.Fatalf("the retried request's first time: %+v", a)
	}

	var batched, groups int64
	trips := rec.Record(func() {
		if r := hold(cached, one); r.Status != http.StatusCreated {
			t.Fatalf("the winner: %d %s", r.Status, r.Body)
		}
		if r := hold(plain, one); r.Status != http.StatusConflict {
			t.Fatalf("a loser the database refuses: %d %s", r.Status, r.Body)
		}
		if r := hold(cached, one); r.Status != http.StatusConflict {
			t.Fatalf("a loser the cache refuses: %d %s", r.Status, r.Body)
		}
		if _, err := env.Payments.CreateIntent(ctx, payments.IntentRequest{Kind: "hotel", PartitionID: one.ID,
			ReservationID: uuid.NewString(), AmountCents: 100, Currency: "EUR", IdempotencyKey: uuid.NewString()}); err != nil {
			t.Fatalf("intent: %v", err)
		}
		// Holds of one room type at once, until some were batched.
		for try := 0; try < 20 && cached.HoldBatchStats().Batched == 0; try++ {
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() { hold(cached, many) })
			}
			wg.Wait()
		}
		batched = cached.HoldBatchStats().Batched
		// A replay in a batch: its key's guard fires in the batch's
		// committing round trip, and the batch runs again checked in Go.
		holds := make([]func() answer, 4)
		for i := range holds {
			key := uuid.NewString()
			if i == 2 {
				key = replayKey
			}
			holds[i] = func() answer { return answer{status: holdKey(cached, replayed, key).Status} }
		}
		answers := queueInOrder(t, cached, replayed, holds)
		if err := lock.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		answers()

		// A group (ADR 0033) with a retried request in it: the group's
		// record fails on the retry's key, the claimed keys are read, the
		// retry replays alone and the others go again as a group.
		retry.ReservationID = uuid.NewString()
		group := []*groupedHold{
			{name: "group 1", req: holdOf(t, gh[1], "w1", 5, 2, 1), key: uuid.NewString(), hash: "h"},
			{name: "group 2", req: holdOf(t, gh[2], "w2", 5, 2, 1), key: uuid.NewString(), hash: "h"},
			{name: "retry", req: retry, key: retryKey, hash: "h"},
		}
		sendWhileLaneBusy(t, env, grouping, gh[0], group, len(group))
		for _, h := range group {
			if h.got.err != nil || h.got.status != http.StatusCreated {
				t.Errorf("%s: %+v, want 201", h.name, h.got)
			}
		}
		groups = grouping.HoldBatchStats().Groups
	})
	if groups != 1 {
		t.Fatalf("%d groups committed, want 1: the group's statements were not sent", groups)
	}
	if cached.HoldBatchStats().Reruns == 0 {
		t.Fatal("no batch ran again after a guard: the exact batch's statements were not sent")
	}
	if batched == 0 {
		t.Fatal("no hold was batched: the batch's statements were not sent")
	}
	warm := warmed()
	sent := dbtest.Statements(trips)
	for _, sql := range sent {
		if !slices.Contains(warm, sql) {
			t.Errorf("the hold path sent a statement the warm-up does not plan (add it to postgres.HoldStatements):\n%s", sql)
		}
	}
	// The drive above went down every branch: most of the list was sent.
	if len(sent) < len(warm)-4 {
		t.Errorf("the hold path sent %d distinct statements, the warm-up plans %d: a branch was not exercised", len(sent), len(warm))
	}
}

// Warm opens the connections it is asked for and has each plan every
// statement, writing nothing. Before the migrations it fails, naming the
// statement, and the pool still serves; once they ran it succeeds.
func TestWarmPlansEveryStatementWritingNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	const conns = 3
	all := postgres.WarmStatements()
	db, err := postgres.Open(ctx, url, postgres.Options{MinConns: conns, MaxConns: 8, Warm: all})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	dbtest.Register(t, db, url)

	if _, err := db.Warm(ctx, conns); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("warm before the migrations: %v, want a missing relation", err)
	}
	if db.WarmFailures() == 0 {
		t.Error("the connections opened before the migrations count no failed warm-up")
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("a failed warm-up left the pool unusable: %v", err)
	}

	if _, err := postgres.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	st, err := db.Warm(ctx, conns)
	if err != nil {
		t.Fatalf("warm: %v", err)
	}
	if st.Conns != conns || st.Statements != len(all) {
		t.Errorf("warmed %+v, want %d connections and %d statements", st, conns, len(all))
	}
	if ps := db.PoolStats(); ps.Total < conns {
		t.Errorf("%d connections open after warming %d", ps.Total, conns)
	}
	var planned, rows int
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'EXPLAIN %'),
		(SELECT count(*) FROM reservations) + (SELECT count(*) FROM outbox) + (SELECT count(*) FROM idempotency_keys) +
		(SELECT count(*) FROM guest_holds) + (SELECT count(*) FROM dev_payment_intents) +
		(SELECT count(*) FROM room_inventory WHERE reserved > 0) + (SELECT count(*) FROM appointments) +
		(SELECT count(*) FROM slots) + (SELECT count(*) FROM slot_audit) + (SELECT count(*) FROM clinic_guests) +
		(SELECT count(*) FROM clinic_guest_days)`).Scan(&planned, &rows); err != nil {
		t.Fatal(err)
	}
	if planned < conns {
		t.Errorf("%d connections ran the warm-up's plans last, want %d", planned, conns)
	}
	if rows != 0 {
		t.Errorf("the warm-up wrote %d rows, want none", rows)
	}
}
