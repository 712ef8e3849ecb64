package postgres_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/soldout"
	"github.com/google/uuid"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func renderAnswer(v any, err error) (int, []byte) {
	if err != nil {
		return http.StatusConflict, []byte(berth.ErrorCode(err))
	}
	return http.StatusCreated, []byte(v.(reservation.Reservation).ID)
}

// The sold-out cache refuses a flash sale's losers without a transaction,
// yet a room freed by a cancel or an expiry is bookable at once through the
// process that committed the freeing (every cancel racing the others), and
// through another process as soon as it hears of it (the event) or after
// the cache's TTL at the latest.
func TestFreedRoomsAreBookableDespiteTheSoldOutCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	const rooms = 10
	h := env.SeedHotel("", rooms, 0, bookingtest.Date(1), bookingtest.Date(5))
	const ttl = time.Minute
	clockA, clockB := &fakeClock{t: time.Now()}, &fakeClock{t: time.Now()}
	a := postgres.NewStore(env.DB, "us-east", 10*time.Minute) // the process that cancels
	a.UseSoldOutCache(soldout.New(ttl, clockA.now))
	b := postgres.NewStore(env.DB, "us-east", 10*time.Minute) // another replica of the region
	b.UseSoldOutCache(soldout.New(ttl, clockB.now))
	in, _ := reservation.ParseDate(bookingtest.Date(2))
	stay := reservation.Stay{CheckIn: in, CheckOut: in.AddDays(2)}
	hold := func(s *postgres.Store, key string) (string, int) {
		t.Helper()
		if key == "" {
			key = uuid.NewString()
		}
		resp, err := s.Hold(ctx, reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID,
			GuestID: "g-" + key, Stay: stay, Quantity: 1}, &berth.Idem{Key: key, Hash: "h", Render: renderAnswer})
		if err != nil {
			t.Errorf("hold: %v", err)
			return "", 0
		}
		if resp.Status == http.StatusConflict && string(resp.Body) != string(berth.CodeSoldOut) {
			t.Errorf("hold: 409 %s", resp.Body)
		}
		return string(resp.Body), resp.Status
	}
	storedSoldOut := func() int {
		var n int
		if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND response_status = 409`,
			h.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sellOut := func(s *postgres.Store) []string {
		t.Helper()
		var ids []string
		for len(ids) < rooms {
			id, status := hold(s, "")
			if status != http.StatusCreated {
				t.Fatalf("hold %d of %d: %d", len(ids)+1, rooms, status)
			}
			ids = append(ids, id)
		}
		return ids
	}
	cancel := func(s *postgres.Store, id string) {
		t.Helper()
		resp, err := s.Cancel(ctx, h.ID, id, func(string) error { return nil }, &berth.Idem{Key: uuid.NewString(), Hash: "c",
			Render: func(any, error) (int, []byte) { return http.StatusOK, nil }})
		if err != nil || resp.Status != http.StatusOK {
			t.Fatalf("cancel %s: %d %v", id, resp.Status, err)
		}
	}

	// Sold out: a knows it from its own last win, b from its first loser,
	// which asks the database (its answer is stored with its key); the
	// next ones are answered from the cache (nothing stored).
	ids := sellOut(a)
	before := storedSoldOut()
	for range 20 {
		if _, status := hold(a, ""); status != http.StatusConflict {
			t.Fatalf("a loser got %d", status)
		}
		if _, status := hold(b, ""); status != http.StatusConflict {
			t.Fatalf("a loser got %d", status)
		}
	}
	if got := storedSoldOut() - before; got != 1 {
		t.Fatalf("%d of 40 refusals went to the database, want 1 (b's first): the cache is not answering", got)
	}
	// A replay of a key the database answered is the stored answer, even
	// when the cache would refuse.
	key := uuid.NewString()
	first, _ := hold(a, key)
	if again, status := hold(a, key); status != http.StatusConflict || again != first {
		t.Fatalf("replay: %d %s", status, again)
	}

	// Concurrent cancels in a: each canceller holds right after its cancel
	// returned, and there is always a room for it — the cache must not
	// refuse any of them.
	start := make(chan struct{})
	var wg sync.WaitGroup
	results := make(chan int, rooms)
	for _, id := range ids {
		wg.Go(func() {
			<-start
			cancel(a, id)
			_, status := hold(a, "")
			results <- status
		})
	}
	close(start)
	wg.Wait()
	close(results)
	for status := range results {
		if status != http.StatusCreated {
			t.Errorf("a hold right after its own cancel in the same process got %d", status)
		}
	}
	if _, status := hold(a, ""); status != http.StatusConflict {
		t.Fatalf("sold out again, but a hold got %d", status)
	}

	// Expiry: the sweeper's commit frees the rooms; holds right after it win.
	if _, err := dbtest.SQL(env.DB).Exec(ctx, `UPDATE reservations SET hold_expires_at = now() - INTERVAL '1 minute'
		WHERE hotel_id = $1 AND status = 'held'`, h.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ExpireHolds(ctx, 100); err != nil || n != rooms {
		t.Fatalf("expire: %d %v", n, err)
	}
	ids = sellOut(a)

	// Another process learns of a cancel through its event (ForgetSoldOut)…
	if _, status := hold(b, ""); status != http.StatusConflict {
		t.Fatalf("sold out, but b's hold got %d", status)
	}
	cancel(a, ids[0])
	b.ForgetSoldOut(h.ID)
	if _, status := hold(b, ""); status != http.StatusCreated {
		t.Errorf("after the cancel's event, b's hold got %d", status)
	}
	// …and without the event after the TTL at the latest.
	if _, status := hold(b, ""); status != http.StatusConflict {
		t.Fatalf("sold out, but b's hold got %d", status)
	}
	cancel(a, ids[1])
	clockB.add(ttl)
	if _, status := hold(b, ""); status != http.StatusCreated {
		t.Errorf("a TTL after the cancel, b's hold got %d", status)
	}
	env.AssertInventory()
}

// Refusals from the cache read their keys together (key_reads.go): under a
// burst of concurrent losers, each still gets its own answer — a retry of a
// winning hold its stored 201, a key reused for another request 422, a new
// key 409 sold_out — and nothing is stored for a refusal from the cache.
func TestCachedRefusalsReadTheirKeysTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const rooms = 8
	env, h, s := soldOutStore(t, rooms, 5)
	in, _ := reservation.ParseDate(bookingtest.Date(2))
	stay := reservation.Stay{CheckIn: in, CheckOut: in.AddDays(1)}
	hold := func(key, hash string) (berth.Response, error) {
		return s.Hold(ctx, reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID,
			GuestID: "g-" + uuid.NewString(), Stay: stay, Quantity: 1}, &berth.Idem{Key: key, Hash: hash, Render: renderAnswer})
	}
	winners := map[string]string{} // key → reservation id
	for len(winners) < rooms {
		key := uuid.NewString()
		resp, err := hold(key, "h")
		if err != nil || resp.Status != http.StatusCreated {
			t.Fatalf("hold %d: %d %v", len(winners)+1, resp.Status, err)
		}
		winners[key] = string(resp.Body)
	}
	if resp, err := hold(uuid.NewString(), "h"); err != nil || resp.Status != http.StatusConflict {
		t.Fatalf("the first loser: %d %v", resp.Status, err) // the database's refusal, now in the cache
	}
	countKeys := func() int {
		var n int
		if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE partition_id = $1`, h.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	stored := countKeys()

	type result struct {
		kind, key string
		resp      berth.Response
		err       error
	}
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make(chan result, 300)
	)
	for i := range 100 {
		if i%25 == 0 { // among the new losers, each winner's key retried and reused, four times
			for key := range winners {
				wg.Go(func() { <-start; r, err := hold(key, "h"); results <- result{"retry", key, r, err} })
				wg.Go(func() { <-start; r, err := hold(key, "other"); results <- result{"reused", key, r, err} })
			}
		}
		wg.Go(func() { <-start; r, err := hold(uuid.NewString(), "h"); results <- result{"new", "", r, err} })
	}
	close(start)
	wg.Wait()
	close(results)
	for r := range results {
		switch r.kind {
		case "retry":
			if r.err != nil || r.resp.Status != http.StatusCreated || string(r.resp.Body) != winners[r.key] || !r.resp.Replayed {
				t.Errorf("a retry of a winning hold: %d %q %v, want its stored 201 %s", r.resp.Status, r.resp.Body, r.err, winners[r.key])
			}
		case "reused":
			if berth.ErrorCode(r.err) != berth.CodeIdempotencyKeyReused {
				t.Errorf("a winner's key with another request: %d %v, want idempotency_key_reused", r.resp.Status, r.err)
			}
		default:
			if r.err != nil || r.resp.Status != http.StatusConflict || string(r.resp.Body) != string(berth.CodeSoldOut) {
				t.Errorf("a new loser: %d %q %v, want 409 sold_out", r.resp.Status, r.resp.Body, r.err)
			}
		}
	}
	if got := countKeys(); got != stored {
		t.Errorf("%d keys stored by refusals from the cache, want none", got-stored)
	}
	env.AssertInventory()
}

// A flash sale's first losers — queued behind the winning transaction
// (batching on) before anything was known — are refused from what the win
// taught the cache, not each by a batch transaction: exactly one winner,
// every other hold 409 sold_out, no refusal stored with its key (only the
// database's refusals are), no batch transaction run.
func TestQueuedLosersAreRefusedByTheWin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, h, s := soldOutStore(t, 1, 5)
	s.SetHoldBatch(postgres.DefaultHoldBatch)
	in, _ := reservation.ParseDate(bookingtest.Date(2))
	stay := reservation.Stay{CheckIn: in, CheckOut: in.AddDays(2)}
	const clients = 60
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make(chan berth.Response, clients)
	)
	for range clients {
		wg.Go(func() {
			<-start
			resp, err := s.Hold(ctx, reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID,
				GuestID: "g-" + uuid.NewString(), Stay: stay, Quantity: 1}, &berth.Idem{Key: uuid.NewString(), Hash: "h", Render: renderAnswer})
			if err != nil {
				t.Errorf("hold: %v", err)
			}
			results <- resp
		})
	}
	close(start)
	wg.Wait()
	close(results)
	won := 0
	for r := range results {
		switch {
		case r.Status == http.StatusCreated:
			won++
		case r.Status != http.StatusConflict || string(r.Body) != string(berth.CodeSoldOut):
			t.Errorf("a loser: %d %s, want 409 sold_out", r.Status, r.Body)
		}
	}
	if won != 1 {
		t.Errorf("%d winners for 1 room", won)
	}
	var stored409 int
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND response_status = 409`,
		h.ID).Scan(&stored409); err != nil {
		t.Fatal(err)
	}
	if st := s.HoldBatchStats(); stored409 != 0 || st.Batches != 0 {
		t.Errorf("%d refusals stored by the database, %d batch transactions (%d holds batched, %d alone); want none: the win told the cache",
			stored409, st.Batches, st.Batched, st.Alone)
	}
	env.AssertInventory()
}

// The holds queued behind a win that sells their nights out are refused
// together, and their keys are read in one statement — not the first alone
// and the others in a second one — each still answered on its own: a new
// key 409 sold_out, the retry of a hold that won before its stored 201.
func TestQueuedLosersReadTheirKeysInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, h, s := soldOutStore(t, 2, 20)
	s.SetHoldBatch(postgres.DefaultHoldBatch)

	// One of the night's two rooms, won before the sale.
	early, earlyKey := holdOf(t, h, "early", 5, 1, 1), uuid.NewString()
	won := doHold(s, early, earlyKey, "h")
	if won.err != nil || won.status != http.StatusCreated {
		t.Fatalf("the early hold: %+v", won)
	}

	// The night is locked, so the leader waits in its transaction and the
	// others queue behind it; the leader then takes the last room.
	lock := lockNight(t, env, h, 5)
	const losers = 40
	holds := []func() answer{func() answer { return doHold(s, holdOf(t, h, "leader", 5, 1, 1), uuid.NewString(), "h") }}
	for i := range losers {
		holds = append(holds, func() answer { return doHold(s, holdOf(t, h, fmt.Sprintf("l%d", i), 5, 1, 1), uuid.NewString(), "h") })
	}
	holds = append(holds, func() answer { return doHold(s, early, earlyKey, "h") })
	answers := queueInOrder(t, s, h, holds)
	before := s.HoldBatchStats()
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	out := answers()
	after := s.HoldBatchStats()

	if a := out[0]; a.err != nil || a.status != http.StatusCreated {
		t.Errorf("the leader: %+v, want 201", a)
	}
	for i, a := range out[1 : 1+losers] {
		if a.err != nil || a.status != http.StatusConflict || a.body != string(berth.CodeSoldOut) {
			t.Errorf("loser %d: %+v, want 409 sold_out", i, a)
		}
	}
	if a := out[len(out)-1]; a != won {
		t.Errorf("the early hold retried: %+v, want its stored answer %+v", a, won)
	}
	reads, keys := after.KeyReads-before.KeyReads, after.KeysRead-before.KeysRead
	if reads != 1 || keys != losers+1 {
		t.Errorf("the queued refusals read %d keys in %d statements, want %d in 1", keys, reads, losers+1)
	}
	if after.Batches != before.Batches {
		t.Errorf("%d batch transactions, want none: the win told the cache", after.Batches-before.Batches)
	}
	env.AssertInventory()
}

// A read of refused holds' keys that follows another of the same hotel
// lingers for the keys asked meanwhile (keyReadLinger): under a stream of
// refusals, the keys that arrive while the next read waits join it rather
// than each waiting for a read of their own after it. Here the first
// refusal's read is held in flight (the key table locked), five more queue
// behind it, and five arrive while the next read lingers: 11 keys in 2
// statements, every refusal 409 sold_out.
func TestRefusalsThatKeepComingJoinTheLingeringRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, h, s := soldOutStore(t, 1, 5)
	lingering, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.SetKeyReadPauseForTest(func() {
		once.Do(func() { lingering <- struct{}{}; <-release })
	})
	req := func(guest string) reservation.HoldRequest { return holdOf(t, h, guest, 2, 1, 1) }
	if a := doHold(s, req("winner"), uuid.NewString(), "h"); a.status != http.StatusCreated {
		t.Fatalf("the winner: %+v", a)
	}
	if a := doHold(s, req("first loser"), uuid.NewString(), "h"); a.status != http.StatusConflict {
		t.Fatalf("the first loser: %+v", a) // the database's refusal, now in the cache
	}
	before := s.HoldBatchStats()

	lock, err := dbtest.SQL(env.DB).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Rollback(ctx) })
	if _, err := lock.Exec(ctx, `LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	answers := make(chan answer, 11)
	refuse := func(n int) {
		for range n {
			go func() { answers <- doHold(s, req("g-"+uuid.NewString()), uuid.NewString(), "h") }()
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	refuse(1)
	waitFor("the first read in flight", func() bool { return s.WaitingKeysForTest(h.ID) == 0 })
	refuse(5)
	waitFor("five keys queued behind it", func() bool { return s.WaitingKeysForTest(h.ID) == 5 })
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select { // the five are taken for the next read, which lingers
	case <-lingering:
	case <-time.After(10 * time.Second):
		t.Fatal("the read after the first did not linger")
	}
	refuse(5)
	waitFor("five keys asked while it lingers", func() bool { return s.WaitingKeysForTest(h.ID) == 5 })
	close(release)
	for range 11 {
		if a := <-answers; a.err != nil || a.status != http.StatusConflict || a.body != string(berth.CodeSoldOut) {
			t.Errorf("a refusal: %+v, want 409 sold_out", a)
		}
	}
	after := s.HoldBatchStats()
	if reads, keys := after.KeyReads-before.KeyReads, after.KeysRead-before.KeysRead; reads != 2 || keys != 11 {
		t.Errorf("%d keys read in %d statements, want 11 in 2 (the first alone, then the ten together)", keys, reads)
	}
}

// soldOutStore starts a database holding one hotel of rooms rooms a night,
// from day 1 to day last, and a store of it with a sold-out cache.
func soldOutStore(t *testing.T, rooms, last int) (*bookingtest.Env, bookingtest.Hotel, *postgres.Store) {
	t.Helper()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	h := env.SeedHotel("", rooms, 0, bookingtest.Date(1), bookingtest.Date(last))
	s := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
	s.UseSoldOutCache(soldout.New(time.Minute, time.Now))
	return env, h, s
}
