package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// answer is one hold's outcome as its client saw it.
type answer struct {
	status int
	body   string
	err    error
}

func holdOf(t *testing.T, h bookingtest.Hotel, guest string, in, nights, qty int) reservation.HoldRequest {
	t.Helper()
	d, err := reservation.ParseDate(bookingtest.Date(in))
	if err != nil {
		t.Fatal(err)
	}
	return reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID, GuestID: guest,
		Stay: reservation.Stay{CheckIn: d, CheckOut: d.AddDays(nights)}, Quantity: qty}
}

func doHold(s *postgres.Store, req reservation.HoldRequest, key, hash string) answer {
	resp, err := s.Hold(context.Background(), req, &berth.Idem{Key: key, Hash: hash, Render: renderAnswer})
	return answer{resp.Status, string(resp.Body), err}
}

// lockNight locks h's night n (bookingtest.Date(n)) in a transaction of
// its own, rolled back when the test ends unless committed first: a hold
// that needs the night waits for it, and the holds after it queue.
func lockNight(t *testing.T, env *bookingtest.Env, h bookingtest.Hotel, n int) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	lock, err := dbtest.SQL(env.DB).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Rollback(ctx) })
	if _, err := lock.Exec(ctx, `SELECT 1 FROM room_inventory WHERE hotel_id = $1 AND night = $2 FOR UPDATE`,
		h.ID, bookingtest.Date(n)); err != nil {
		t.Fatal(err)
	}
	return lock
}

// queueInOrder starts holds (of h's room type, whose first night a test
// holds locked) one at a time, each once the one before it has queued, so
// that arrival order is their order: the first waits in its transaction,
// the others queue behind it to go as one batch. It returns when all are
// queued; answers waits for them (after the test lets the lock go).
func queueInOrder(t *testing.T, store *postgres.Store, h bookingtest.Hotel, holds []func() answer) (answers func() []answer) {
	t.Helper()
	out := make([]answer, len(holds))
	var wg sync.WaitGroup
	for i, hold := range holds {
		wg.Go(func() { out[i] = hold() })
		deadline := time.Now().Add(10 * time.Second)
		for store.QueuedHoldsForTest(h.ID, h.RoomTypeID) < i && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	if n := store.QueuedHoldsForTest(h.ID, h.RoomTypeID); n != len(holds)-1 {
		t.Fatalf("%d holds queued behind the first, want %d", n, len(holds)-1)
	}
	return func() []answer {
		wg.Wait()
		return out
	}
}

// 400 holds of overlapping stays and quantities, racing on one 12-room room
// type through a store that batches: the invariant holds (postgres.Verify),
// every winner has its own reservation, event and stored answer, every
// loser its own stored 409, and replaying every request — racing again,
// through the batches — answers each with its own first answer.
func TestBatchedHoldsKeepTheInvariantAndTheirOwnAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	h := env.SeedHotel("", 12, 0, bookingtest.Date(1), bookingtest.Date(30))
	store := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
	store.SetHoldBatch(64)

	const holds = 400
	rng := rand.New(rand.NewPCG(17, 3))
	reqs := make([]reservation.HoldRequest, holds)
	keys := make([]string, holds)
	for i := range reqs {
		reqs[i] = holdOf(t, h, fmt.Sprintf("g%d", i), 5+rng.IntN(10), 1+rng.IntN(4), 1+rng.IntN(3))
		keys[i] = uuid.NewString()
	}
	race := func() []answer {
		out := make([]answer, holds)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r := reqs[i]
				r.ReservationID = uuid.NewString() // a retry is a new request with the same key
				out[i] = doHold(store, r, keys[i], "hash")
			}()
		}
		close(start)
		wg.Wait()
		return out
	}
	began := time.Now()
	first := race()
	elapsed := time.Since(began)
	stats := store.HoldBatchStats()
	if stats.Batches == 0 || stats.Batched == 0 {
		t.Fatalf("400 racing holds of one room type formed no batch: %+v", stats)
	}
	t.Logf("batching: %+v", stats)
	// Every committed batch's phases are timed, and a room type's batches
	// run one at a time: together they fit in the race.
	if stats.Lock <= 0 || stats.Decide <= 0 || stats.Commit <= 0 {
		t.Errorf("batch phases not timed: lock %v, decide %v, commit %v", stats.Lock, stats.Decide, stats.Commit)
	}
	if sum := stats.Lock + stats.Decide + stats.Commit; sum > elapsed {
		t.Errorf("the batches of one room type took %v in all, more than the %v of the race: they overlapped or were timed wrong", sum, elapsed)
	}

	won := map[string]bool{}
	for i, a := range first {
		switch {
		case a.err != nil:
			t.Errorf("hold %d: %v", i, a.err)
		case a.status == http.StatusCreated:
			won[a.body] = true
		case a.status == http.StatusConflict && a.body == string(berth.CodeSoldOut):
		default:
			t.Errorf("hold %d: %d %s", i, a.status, a.body)
		}
	}
	if len(won) == 0 {
		t.Fatal("no hold won")
	}
	env.AssertInventory()

	// Every winner's answer names its own reservation, and it has its own event.
	db := dbtest.SQL(env.DB)
	var held, events, stored, soldOut int
	if err := db.QueryRow(ctx, `SELECT
		  (SELECT count(*) FROM reservations WHERE hotel_id = $1 AND status = 'held'),
		  (SELECT count(DISTINCT aggregate_id) FROM outbox WHERE partition_id = $1 AND event_type = 'reservation.held'),
		  (SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND response_status = 201),
		  (SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND response_status = 409)`, h.ID).
		Scan(&held, &events, &stored, &soldOut); err != nil {
		t.Fatal(err)
	}
	if held != len(won) || events != len(won) || stored != len(won) || soldOut != holds-len(won) {
		t.Errorf("%d winners answered; %d held reservations, %d held events, %d stored 201s, %d stored 409s of %d losers",
			len(won), held, events, stored, soldOut, holds-len(won))
	}
	rows, err := db.Query(ctx, `SELECT reservation_id::TEXT FROM reservations WHERE hotel_id = $1`, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if !won[id] {
			t.Errorf("reservation %s is no winner's answer", id)
		}
	}
	rows.Close()

	// Replays, racing through the batches, answer as the first time.
	again := race()
	for i := range again {
		if again[i] != first[i] {
			t.Errorf("hold %d: first %+v, replayed %+v", i, first[i], again[i])
		}
	}
	env.AssertInventory()
}

// A batch in which some holds cannot be decided with the others — past a
// per-guest limit, a guest twice, a key used before with another request, a
// key twice in the batch, a night not loaded — decides the others together and each
// of those alone, with the answer it would get without batching.
func TestOneBadHoldInABatchFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	h := env.SeedHotel("", 50, 0, bookingtest.Date(1), bookingtest.Date(20))
	store := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
	store.SetGuestLimits(berth.GuestLimits{Holds: 1, Quantity: 5})
	store.SetHoldBatch(64)

	// A key answered once already, for another request.
	reused := uuid.NewString()
	if a := doHold(store, holdOf(t, h, "early", 3, 1, 1), reused, "first request"); a.status != http.StatusCreated {
		t.Fatalf("first hold: %+v", a)
	}

	// Keep the room type busy: a transaction holds one night, so the first
	// hold below waits in its transaction and the others queue behind it,
	// all to go as one batch.
	lock := lockNight(t, env, h, 5)
	type call struct {
		name string
		req  reservation.HoldRequest
		key  string
		hash string
	}
	dupKey := uuid.NewString()
	calls := []call{
		{"leader", holdOf(t, h, "leader", 5, 2, 1), uuid.NewString(), "h"},
		{"good 1", holdOf(t, h, "g1", 5, 3, 2), uuid.NewString(), "h"},
		{"limited 1", holdOf(t, h, "twice", 6, 2, 1), uuid.NewString(), "h"},
		{"good 2", holdOf(t, h, "g2", 4, 2, 1), uuid.NewString(), "h"},
		{"limited 2", holdOf(t, h, "twice", 7, 1, 1), uuid.NewString(), "h"},
		{"reused key", holdOf(t, h, "reuser", 5, 1, 1), reused, "another request"},
		{"duplicate 1", holdOf(t, h, "dup", 8, 1, 1), dupKey, "h"},
		{"not loaded", holdOf(t, h, "far", 19, 3, 1), uuid.NewString(), "h"},
		{"duplicate 2", holdOf(t, h, "dup", 8, 1, 1), dupKey, "h"},
		{"good 3", holdOf(t, h, "g3", 6, 1, 4), uuid.NewString(), "h"},
		{"limited early", holdOf(t, h, "early", 6, 1, 1), uuid.NewString(), "h"},
	}
	holds := make([]func() answer, len(calls))
	for i, c := range calls {
		holds[i] = func() answer { return doHold(store, c.req, c.key, c.hash) }
	}
	answers := queueInOrder(t, store, h, holds)
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	out := answers()

	got := map[string]answer{}
	for i, c := range calls {
		got[c.name] = out[i]
	}
	for _, name := range []string{"leader", "good 1", "good 2", "good 3", "limited 1", "duplicate 1", "duplicate 2"} {
		if a := got[name]; a.err != nil || a.status != http.StatusCreated {
			t.Errorf("%s: %+v, want 201", name, a)
		}
	}
	if got["duplicate 1"] != got["duplicate 2"] {
		t.Errorf("one key twice in a batch: %+v and %+v, want one answer", got["duplicate 1"], got["duplicate 2"])
	}
	if a := got["limited 2"]; berth.ErrorCode(a.err) != berth.CodeLimitExceeded {
		t.Errorf("the guest's second hold: %+v, want limit_exceeded", a)
	}
	if a := got["limited early"]; berth.ErrorCode(a.err) != berth.CodeLimitExceeded {
		t.Errorf("a hold of a guest at the limit: %+v, want limit_exceeded", a)
	}
	if a := got["reused key"]; berth.ErrorCode(a.err) != berth.CodeIdempotencyKeyReused {
		t.Errorf("a key reused with another request: %+v, want idempotency_key_reused", a)
	}
	if a := got["not loaded"]; a.err != nil || a.status != http.StatusConflict || a.body != string(berth.CodeSoldOut) {
		t.Errorf("a stay past the loaded nights: %+v, want 409 sold_out", a)
	}
	stats := store.HoldBatchStats()
	if stats.Lock <= 0 || stats.Decide <= 0 || stats.Commit <= 0 {
		t.Errorf("the committed batch's phases not timed: %+v", stats)
	}
	stats.Lock, stats.Decide, stats.Commit = 0, 0, 0 // timed, not counted
	if want := (postgres.BatchStats{Batches: 1, Batched: 5, Alone: 5, Reruns: 1}); stats != want {
		// good 1 to 3, limited 1 and duplicate 1 decided together; limited 2,
		// the reused key, the stay not loaded, duplicate 2 and the guest at
		// the limit alone. The reused key and the guest at the limit fire
		// guards in the batch's committing round trip: nothing of it
		// commits, and it runs once more, checked before its COMMIT.
		t.Errorf("batching: %+v, want %+v", stats, want)
	}
	env.AssertInventory()
}
