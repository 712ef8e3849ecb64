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

// waitUntil polls cond every millisecond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// oneLaneStore is a store of env with batching on and one lane, whose
// groups wait at most wait for it.
func oneLaneStore(env *bookingtest.Env, wait time.Duration) *postgres.Store {
	store := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
	store.SetHoldBatch(64)
	store.SetHoldLanes(1)
	store.SetHoldGroupWait(wait)
	return store
}

// seedHotels seeds n hotels of rooms rooms each, loaded for 30 days.
func seedHotels(env *bookingtest.Env, n, rooms int) []bookingtest.Hotel {
	hotels := make([]bookingtest.Hotel, n)
	for i := range hotels {
		hotels[i] = env.SeedHotel("", rooms, 0, bookingtest.Date(1), bookingtest.Date(30))
	}
	return hotels
}

// holdTheLane fills the store's only lane: a hold of lead waits in its
// transaction for lead's night 5, locked by the returned transaction, until
// the test commits it; leader waits for that hold's answer.
func holdTheLane(t *testing.T, env *bookingtest.Env, store *postgres.Store, lead bookingtest.Hotel) (lock pgx.Tx, leader func() answer) {
	t.Helper()
	lock = lockNight(t, env, lead, 5)
	done := make(chan answer, 1)
	go func() { done <- doHold(store, holdOf(t, lead, "leader", 5, 2, 1), uuid.NewString(), "h") }()
	waitUntil(t, "the leader's transaction", func() bool { return store.QueuedHoldsForTest(lead.ID, lead.RoomTypeID) == 0 })
	return lock, func() answer { return <-done }
}

// groupedHold is a hold a group test sends, and what its client saw.
type groupedHold struct {
	name string
	req  reservation.HoldRequest
	key  string
	hash string
	got  answer
}

// sendWhileLaneBusy sends holds through store (one lane) while its lane is
// held by a hold of lead waiting on a locked night: each hold claims its
// room type and waits for a group (or queues behind its room type's first),
// until want room types wait; then the lock goes, and it returns once every
// hold has its answer.
func sendWhileLaneBusy(t *testing.T, env *bookingtest.Env, store *postgres.Store, lead bookingtest.Hotel, holds []*groupedHold, want int) answer {
	t.Helper()
	ctx := context.Background()
	lock, leader := holdTheLane(t, env, store, lead)
	var wg sync.WaitGroup
	for i, h := range holds {
		wg.Go(func() { h.got = doHold(store, h.req, h.key, h.hash) })
		waitUntil(t, fmt.Sprintf("hold %d (%s) to wait", i, h.name), func() bool {
			queued := 0
			for _, o := range holds[:i+1] {
				if o.req.HotelID == h.req.HotelID && o.req.RoomTypeID == h.req.RoomTypeID {
					queued++
				}
			}
			return store.QueuedHoldsForTest(h.req.HotelID, h.req.RoomTypeID) == queued
		})
	}
	if n := store.GroupWaitingForTest(); n != want {
		t.Fatalf("%d room types wait for a group, want %d", n, want)
	}
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return leader()
}

// Holds of idle room types of other hotels, sent while the store's only
// lane is busy, wait and go as one group transaction — each with its own
// reservation, event and stored answer, replayed as the first time — and
// a hold that queued behind one of them follows it as its room type's next
// batch.
func TestSpreadHoldsGroupWhileEveryLaneIsBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	hotels := seedHotels(env, 5, 10)
	store := oneLaneStore(env, time.Hour) // the test lets the lane go

	var holds []*groupedHold
	for i, h := range hotels[1:] {
		holds = append(holds, &groupedHold{name: fmt.Sprintf("hotel %d", i+1), req: holdOf(t, h, fmt.Sprintf("g%d", i), 5, 3, 2),
			key: uuid.NewString(), hash: "h"})
	}
	holds = append(holds, &groupedHold{name: "second of hotel 1", req: holdOf(t, hotels[1], "second", 6, 2, 1), key: uuid.NewString(), hash: "h"})
	leader := sendWhileLaneBusy(t, env, store, hotels[0], holds, 4)

	if leader.err != nil || leader.status != http.StatusCreated {
		t.Errorf("leader: %+v", leader)
	}
	for _, h := range holds {
		if h.got.err != nil || h.got.status != http.StatusCreated {
			t.Errorf("%s: %+v, want 201", h.name, h.got)
		}
	}
	if st := store.HoldBatchStats(); st.Groups != 1 || st.Grouped != 4 {
		t.Errorf("groups %d of %d holds, want 1 of 4 (%+v)", st.Groups, st.Grouped, st)
	}
	env.AssertInventory()

	// Each hold has its own reservation, held event and stored answer.
	db := dbtest.SQL(env.DB)
	for _, h := range append([]bookingtest.Hotel{hotels[0]}, hotels[1:]...) {
		want := 1
		if h.ID == hotels[1].ID {
			want = 2
		}
		var held, events, stored int
		if err := db.QueryRow(ctx, `SELECT
			  (SELECT count(*) FROM reservations WHERE hotel_id = $1 AND status = 'held'),
			  (SELECT count(DISTINCT aggregate_id) FROM outbox WHERE partition_id = $1 AND event_type = 'reservation.held'),
			  (SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND response_status = 201)`, h.ID).
			Scan(&held, &events, &stored); err != nil {
			t.Fatal(err)
		}
		if held != want || events != want || stored != want {
			t.Errorf("hotel %s: %d held, %d events, %d stored answers, want %d each", h.ID, held, events, stored, want)
		}
	}
	for _, h := range holds {
		var id string
		if err := db.QueryRow(ctx, `SELECT reservation_id::TEXT FROM reservations WHERE hotel_id = $1 AND guest_id = $2`,
			h.req.HotelID, h.req.GuestID).Scan(&id); err != nil {
			t.Fatalf("%s: %v", h.name, err)
		}
		if id != h.req.ReservationID || h.got.body != id {
			t.Errorf("%s: answered %q, stored %s, asked for %s", h.name, h.got.body, id, h.req.ReservationID)
		}
	}

	// Replays answer as the first time.
	for _, h := range holds {
		again := h.req
		again.ReservationID = uuid.NewString() // a retry is a new request with the same key
		if a := doHold(store, again, h.key, h.hash); a != h.got {
			t.Errorf("%s replayed: %+v, first %+v", h.name, a, h.got)
		}
	}
	env.AssertInventory()
}

// A group in which some holds cannot be decided with the others — a stay
// sold out, a guest at a limit, a hotel homed elsewhere, a key used before
// with another request, a key answered before (a retry) — decides the
// others together and each of those alone, with the answer it would get
// without groups.
func TestOneBadHoldInAGroupFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	seed := func(region string, rooms int) bookingtest.Hotel {
		return env.SeedHotel(region, rooms, 0, bookingtest.Date(1), bookingtest.Date(20))
	}
	lead, good1, good2, full, limited, reused, retried := seed("", 5), seed("", 5), seed("", 5), seed("", 1), seed("", 5), seed("", 5), seed("", 5)
	// A hotel moved to another region since the router that sends its
	// hold looked: its nights are homed there now.
	foreign := seed("", 5)
	if _, err := postgres.NewPlacements(env.DB).MovePlacement(ctx, berth.KindHotel, foreign.ID, "eu-west"); err != nil {
		t.Fatal(err)
	}
	store := oneLaneStore(env, time.Hour) // the test lets the lane go
	store.SetGuestLimits(berth.GuestLimits{Holds: 1, Quantity: 5})

	// What the bad holds meet: the one room taken, the guest's one hold
	// made, a key answered for another request, a key answered for this one.
	if a := doHold(store, holdOf(t, full, "first", 4, 4, 1), uuid.NewString(), "h"); a.status != http.StatusCreated {
		t.Fatalf("taking the room: %+v", a)
	}
	if a := doHold(store, holdOf(t, limited, "busy", 10, 1, 1), uuid.NewString(), "h"); a.status != http.StatusCreated {
		t.Fatalf("the guest's first hold: %+v", a)
	}
	reusedKey := uuid.NewString()
	if a := doHold(store, holdOf(t, reused, "other", 3, 1, 1), reusedKey, "another request"); a.status != http.StatusCreated {
		t.Fatalf("the key's first request: %+v", a)
	}
	retriedKey, retriedReq := uuid.NewString(), holdOf(t, retried, "retrier", 5, 2, 1)
	first := doHold(store, retriedReq, retriedKey, "h")
	if first.status != http.StatusCreated {
		t.Fatalf("the retried request's first time: %+v", first)
	}

	again := retriedReq
	again.ReservationID = uuid.NewString()
	holds := []*groupedHold{
		{name: "good 1", req: holdOf(t, good1, "g1", 5, 3, 2), key: uuid.NewString(), hash: "h"},
		{name: "sold out", req: holdOf(t, full, "late", 5, 2, 1), key: uuid.NewString(), hash: "h"},
		{name: "limited", req: holdOf(t, limited, "busy", 5, 1, 1), key: uuid.NewString(), hash: "h"},
		{name: "foreign", req: holdOf(t, foreign, "abroad", 5, 1, 1), key: uuid.NewString(), hash: "h"},
		{name: "reused key", req: holdOf(t, reused, "reuser", 5, 1, 1), key: reusedKey, hash: "this request"},
		{name: "retry", req: again, key: retriedKey, hash: "h"},
		{name: "good 2", req: holdOf(t, good2, "g2", 6, 1, 4), key: uuid.NewString(), hash: "h"},
	}
	if leader := sendWhileLaneBusy(t, env, store, lead, holds, len(holds)); leader.status != http.StatusCreated {
		t.Errorf("leader: %+v", leader)
	}
	got := map[string]answer{}
	for _, h := range holds {
		got[h.name] = h.got
	}
	for _, name := range []string{"good 1", "good 2"} {
		if a := got[name]; a.err != nil || a.status != http.StatusCreated {
			t.Errorf("%s: %+v, want 201", name, a)
		}
	}
	if a := got["retry"]; a != first {
		t.Errorf("retry: %+v, want the first answer %+v", a, first)
	}
	for name, code := range map[string]berth.Code{"sold out": berth.CodeSoldOut, "limited": berth.CodeLimitExceeded,
		"foreign": berth.CodeMisdirected, "reused key": berth.CodeIdempotencyKeyReused} {
		a := got[name]
		if c := berth.ErrorCode(a.err); c != code && a.body != string(code) {
			t.Errorf("%s: %+v (%v), want %s", name, a, a.err, code)
		}
	}
	if st := store.HoldBatchStats(); st.Groups != 1 || st.Grouped != 2 {
		t.Errorf("groups %d of %d holds, want 1 of the 2 good ones (%+v)", st.Groups, st.Grouped, st)
	}
	env.AssertInventory()
	db := dbtest.SQL(env.DB)
	for h, want := range map[bookingtest.Hotel]int{good1: 1, good2: 1, full: 1, limited: 1, reused: 1, retried: 1, foreign: 0} {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE hotel_id = $1`, h.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("hotel %s: %d reservations, want %d", h.ID, n, want)
		}
	}
}

// 600 holds racing over 30 hotels of few rooms through a store of one lane:
// groups form, the invariant holds (postgres.Verify), every winner has its
// own reservation, event and stored answer, every loser its own stored 409,
// and replaying every request, racing again, answers each as the first time.
func TestGroupedHoldsKeepTheInvariantAndTheirOwnAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	hotels := seedHotels(env, 30, 6)
	store := oneLaneStore(env, postgres.DefaultGroupWait)

	const holds = 600
	rng := rand.New(rand.NewPCG(5, 8))
	reqs := make([]reservation.HoldRequest, holds)
	keys := make([]string, holds)
	for i := range reqs {
		reqs[i] = holdOf(t, hotels[rng.IntN(len(hotels))], fmt.Sprintf("g%d", i), 3+rng.IntN(10), 1+rng.IntN(3), 1+rng.IntN(2))
		keys[i] = uuid.NewString()
	}
	race := func() []answer {
		out := make([]answer, holds)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Go(func() {
				<-start
				r := reqs[i]
				r.ReservationID = uuid.NewString() // a retry is a new request with the same key
				out[i] = doHold(store, r, keys[i], "hash")
			})
		}
		close(start)
		wg.Wait()
		return out
	}
	first := race()
	st := store.HoldBatchStats()
	if st.Groups == 0 {
		t.Fatalf("600 racing holds over 30 hotels through one lane formed no group: %+v", st)
	}
	t.Logf("groups and batches: %+v", st)
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
	env.AssertInventory()
	db := dbtest.SQL(env.DB)
	var held, events, stored, soldOut int
	if err := db.QueryRow(ctx, `SELECT
		  (SELECT count(*) FROM reservations WHERE status = 'held'),
		  (SELECT count(DISTINCT aggregate_id) FROM outbox WHERE event_type = 'reservation.held'),
		  (SELECT count(*) FROM idempotency_keys WHERE response_status = 201),
		  (SELECT count(*) FROM idempotency_keys WHERE response_status = 409)`).
		Scan(&held, &events, &stored, &soldOut); err != nil {
		t.Fatal(err)
	}
	if held != len(won) || events != len(won) || stored != len(won) || soldOut != holds-len(won) {
		t.Errorf("%d winners answered; %d held reservations, %d held events, %d stored 201s, %d stored 409s of %d losers",
			len(won), held, events, stored, soldOut, holds-len(won))
	}
	again := race()
	for i := range again {
		if again[i] != first[i] {
			t.Errorf("hold %d: first %+v, replayed %+v", i, first[i], again[i])
		}
	}
	env.AssertInventory()
}

// A malformed hold (a room type that is no UUID) fails its group's first
// statement, so every hold of the group runs alone: the good one is held,
// the malformed one gets what it gets without groups.
func TestMalformedHoldInAGroupFailsAlone(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	hotels := seedHotels(env, 3, 5)
	lead, good, other := hotels[0], hotels[1], hotels[2]
	store := oneLaneStore(env, time.Hour) // the test lets the lane go
	bad := holdOf(t, other, "bad", 5, 1, 1)
	bad.RoomTypeID = "not-a-uuid"
	alone := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
	alone.SetHoldBatch(0)
	want := doHold(alone, bad, uuid.NewString(), "h")

	holds := []*groupedHold{
		{name: "good", req: holdOf(t, good, "g", 5, 2, 1), key: uuid.NewString(), hash: "h"},
		{name: "malformed", req: bad, key: uuid.NewString(), hash: "h"},
	}
	sendWhileLaneBusy(t, env, store, lead, holds, 2)
	if a := holds[0].got; a.err != nil || a.status != http.StatusCreated {
		t.Errorf("good: %+v, want 201", a)
	}
	got := holds[1].got
	if got.status != want.status || got.body != want.body || berth.ErrorCode(got.err) != berth.ErrorCode(want.err) {
		t.Errorf("malformed: %+v (%v), alone %+v (%v)", got, got.err, want, want.err)
	}
	if st := store.HoldBatchStats(); st.Groups != 0 {
		t.Errorf("a group committed with a malformed hold in it: %+v", st)
	}
	env.AssertInventory()
}

// A lane held by a transaction that waits for a row lock does not hold up
// the holds of other room types for longer than the group wait: a hold of
// another hotel is answered while the lock is still held.
func TestAHoldWaitsForAGroupAtMostTheGroupWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	hotels := seedHotels(env, 2, 5)
	lead, other := hotels[0], hotels[1]
	store := oneLaneStore(env, 20*time.Millisecond)

	lock, leader := holdTheLane(t, env, store, lead)
	done := make(chan answer, 1)
	go func() { done <- doHold(store, holdOf(t, other, "other", 5, 2, 1), uuid.NewString(), "h") }()
	select {
	case a := <-done:
		if a.err != nil || a.status != http.StatusCreated {
			t.Errorf("the other hotel's hold: %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Error("the other hotel's hold waited 10 s for the lane of a transaction waiting on a lock")
	}
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if a := leader(); a.err != nil || a.status != http.StatusCreated {
		t.Errorf("leader: %+v", a)
	}
	env.AssertInventory()
}

// A hold whose request ends while it waits for a group leaves without a
// trace: it is answered at once, nothing of it commits, and its room type
// is idle again — the next hold of it runs as on an idle store.
func TestAHoldLeavingWhileItWaitsForAGroupLeavesNoClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	hotels := seedHotels(env, 2, 5)
	lead, other := hotels[0], hotels[1]
	store := oneLaneStore(env, time.Hour) // only the lane, freed by the test, sends a group

	lock, leader := holdTheLane(t, env, store, lead)

	reqCtx, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() {
		_, err := store.Hold(reqCtx, holdOf(t, other, "leaving", 5, 2, 1), &berth.Idem{Key: uuid.NewString(), Hash: "h", Render: renderAnswer})
		left <- err
	}()
	waitUntil(t, "the hold to wait for a group", func() bool { return store.GroupWaitingForTest() == 1 })
	cancel()
	select {
	case err := <-left:
		if err == nil {
			t.Error("a hold whose request ended while it waited was answered without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a hold whose request ended while it waited for a group was not answered in 10 s")
	}
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if a := leader(); a.status != http.StatusCreated {
		t.Errorf("leader: %+v", a)
	}
	waitUntil(t, "the room type to be idle", func() bool { return store.QueuedHoldsForTest(other.ID, other.RoomTypeID) == -1 })
	if a := doHold(store, holdOf(t, other, "next", 5, 2, 1), uuid.NewString(), "h"); a.err != nil || a.status != http.StatusCreated {
		t.Errorf("the next hold of the room type: %+v", a)
	}
	var n int
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM reservations WHERE hotel_id = $1`, other.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d reservations of the room type, want the next hold's only", n)
	}
	if st := store.HoldBatchStats(); st.Groups != 0 {
		t.Errorf("a group committed: %+v", st)
	}
	env.AssertInventory()
}

// A group whose record meets a key held by a duplicate still in flight
// (lock_timeout) finds no key claimed after its rollback, so every hold of
// it with a key goes alone: the others are held, the one whose duplicate is
// in flight answers 409 idempotency_in_progress, and nothing of it commits.
func TestAGroupMeetingAKeyInFlightSendsItsKeyedHoldsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east", DB: postgres.Options{LockTimeout: 2 * time.Second}})
	hotels := seedHotels(env, 4, 5)
	lead, first, busy, last := hotels[0], hotels[1], hotels[2], hotels[3]
	store := oneLaneStore(env, time.Hour) // the test lets the lane go

	// The duplicate in flight: busy's key claimed by a transaction that
	// neither commits nor rolls back until the test ends.
	inFlight := uuid.NewString()
	holder, err := dbtest.SQL(env.DB).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	if _, err := holder.Exec(ctx, `INSERT INTO idempotency_keys (partition_id, idem_key, home_region, request_hash)
		VALUES ($1, $2, 'us-east', 'h')`, busy.ID, inFlight); err != nil {
		t.Fatal(err)
	}

	holds := []*groupedHold{
		{name: "first", req: holdOf(t, first, "g1", 5, 2, 1), key: uuid.NewString(), hash: "h"},
		{name: "in flight", req: holdOf(t, busy, "g2", 5, 2, 1), key: inFlight, hash: "h"},
		{name: "last", req: holdOf(t, last, "g3", 5, 2, 1), key: uuid.NewString(), hash: "h"},
	}
	if leader := sendWhileLaneBusy(t, env, store, lead, holds, len(holds)); leader.status != http.StatusCreated {
		t.Errorf("leader: %+v", leader)
	}
	for _, h := range []*groupedHold{holds[0], holds[2]} {
		if h.got.err != nil || h.got.status != http.StatusCreated {
			t.Errorf("%s: %+v, want 201", h.name, h.got)
		}
	}
	if a := holds[1].got; berth.ErrorCode(a.err) != berth.CodeIdempotencyInProgress {
		t.Errorf("in flight: %+v (%v), want %s", a, a.err, berth.CodeIdempotencyInProgress)
	}
	// The three waited as one group (sendWhileLaneBusy), which rolled back;
	// none committed in a group.
	if st := store.HoldBatchStats(); st.Groups != 0 || st.Grouped != 0 {
		t.Errorf("groups %d of %d holds, want none committed (%+v)", st.Groups, st.Grouped, st)
	}
	env.AssertInventory()
	db := dbtest.SQL(env.DB)
	for h, want := range map[bookingtest.Hotel]int{lead: 1, first: 1, busy: 0, last: 1} {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE hotel_id = $1`, h.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("hotel %s: %d reservations, want %d", h.ID, n, want)
		}
	}
}
