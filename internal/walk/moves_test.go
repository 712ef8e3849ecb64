package walk_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/router"
	"github.com/berthhq/berth/internal/walk"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// Relocations while partitions move between regions. Every region runs a
// booking service, its outbox relay and its walk consumer on one database
// and one in-process NATS server; the desk goes through a router, which
// follows a move's 421. A saga step that reaches a region which is no
// longer (or not yet) the partition's home is answered 421 by the fence and
// skipped there; when the move makes every region skip a step, the
// resume-walks job of the original's home asks again.

// world is three regions on one database and one broker.
type world struct {
	t      *testing.T
	db     *postgres.DB
	envs   map[string]*bookingtest.Env
	router *bookingtest.Env // an Env pointed at the us-east router
	js     jetstream.JetStream
	place  *postgres.Placements
	log    *slog.Logger

	mu        sync.Mutex
	consumers map[string]func() // stop functions of the running walk consumers
	stops     []func()
	loc       *time.Location
}

func newWorld(t *testing.T) *world {
	t.Helper()
	db, url := dbtest.New(t, postgres.Options{LockTimeout: 2 * time.Second, StatementTimeout: 5 * time.Second})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &world{t: t, db: db, envs: map[string]*bookingtest.Env{}, place: postgres.NewPlacements(db), log: quiet,
		consumers: map[string]func(){}, loc: midDay(t)}
	urls := map[string]string{}
	for _, region := range berth.Regions() {
		env := bookingtest.StartOn(t, db, url, bookingtest.Options{Region: region, Configure: func(c *httpapi.Config, s *postgres.Store) {
			c.Placements = postgres.NewPlacements(s.DB())
		}})
		w.envs[region], urls[region] = env, env.URL
	}
	dir := placement.NewDirectory(postgres.NewPlacements(db), quiet)
	if err := dir.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(router.Config{Region: "us-east", Bookings: urls, Directory: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	e := w.envs["us-east"]
	w.router = &bookingtest.Env{T: t, URL: srv.URL, DB: db, Store: e.Store, Tokens: e.Tokens, Client: e.Client, Server: srv}

	ns := natstest.Start(t)
	nc, err := natsbus.Connect(ns.URL, "moves-test", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if w.js, err = natsbus.NewJetStream(nc, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := natsbus.EnsureStream(context.Background(), w.js); err != nil {
		t.Fatal(err)
	}
	// Every region's relay runs throughout: a moved partition's outbox
	// rows move with it, and its new home's relay sends them.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, region := range berth.Regions() {
		relay := natsbus.NewRelay(w.js, w.envs[region].Store, natsbus.RelayConfig{Region: region, Poll: 10 * time.Millisecond, Log: quiet})
		wg.Go(func() { relay.Run(ctx) })
	}
	w.stops = append(w.stops, func() { cancel(); wg.Wait() })
	t.Cleanup(w.stop)
	return w
}

// midDay is a fixed-offset zone where it is now mid-day, so the hotels'
// "today" holds for the whole test.
func midDay(t *testing.T) *time.Location {
	t.Helper()
	for off := -12; off <= 12; off++ {
		loc, err := time.LoadLocation(fmt.Sprintf("Etc/GMT%+d", off))
		if err != nil {
			t.Fatal(err)
		}
		if h := time.Now().In(loc).Hour(); h >= 8 && h <= 16 {
			return loc
		}
	}
	t.Fatal("no zone where it is mid-day")
	return nil
}

func (w *world) stop() {
	w.mu.Lock()
	for r, s := range w.consumers {
		s()
		delete(w.consumers, r)
	}
	w.mu.Unlock()
	for _, s := range w.stops {
		s()
	}
	w.stops = nil
}

// startConsumer runs region's walk consumer (the real saga over that
// region's store) until stopConsumer.
func (w *world) startConsumer(region string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.consumers[region] != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	cfg := walk.ConsumerConfig(region, postgres.IsTransient, w.log)
	cfg.Retry = func(uint64) time.Duration { return 50 * time.Millisecond }
	cfg.MaxDeliver = 20
	saga := walk.New(w.envs[region].Store, w.log)
	go func() { defer close(done); _ = natsbus.Consume(ctx, w.js, cfg, saga.Handle) }()
	w.consumers[region] = func() { cancel(); <-done }
}

func (w *world) stopConsumer(region string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.consumers[region]; s != nil {
		s()
		delete(w.consumers, region)
	}
}

// drain waits until every walk message is sent and the regions' consumers
// have handled every one (settled).
func (w *world) drain(ctx context.Context, regions ...string) {
	w.t.Helper()
	durables := make([]string, 0, len(regions))
	for _, r := range regions {
		durables = append(durables, "walks-"+r)
	}
	waitFor(ctx, w.t, "the walk messages to be handled", func() bool { return settled(ctx, w.db, w.js, durables...) })
}

// move re-homes a hotel (as `router shards move` does).
func (w *world) move(ctx context.Context, hotelID, to string) {
	w.t.Helper()
	if _, err := w.place.MovePlacement(ctx, berth.KindHotel, hotelID, to); err != nil {
		w.t.Fatalf("move %s to %s: %v", hotelID, to, err)
	}
}

// chainHotel creates a hotel of the chain in the city, homed in region,
// with a Double room type selling total rooms from yesterday for five
// nights, and rooms physical rooms of it; it returns the hotel and type.
func (w *world) chainHotel(region, name string, total, rooms int) bookingtest.Hotel {
	w.t.Helper()
	env, admin := w.envs[region], w.envs[region].Admin()
	today := time.Now().In(w.loc)
	day := func(n int) string { return today.AddDate(0, 0, n).Format(time.DateOnly) }
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels", Token: admin, Body: map[string]any{
		"name": name, "city": "Porto", "country": "PT", "timezone": w.loc.String(), "home_region": region, "chain": "Acme"}})
	if r.Status != http.StatusCreated {
		w.t.Fatalf("hotel: %d %s", r.Status, r.Body)
	}
	h := bookingtest.Hotel{ID: r.JSON()["hotel_id"].(string)}
	h.RoomTypeID = w.roomType(region, h.ID, "Double", total, day(-1), day(4))
	for i := range rooms {
		if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/rooms", Token: admin, Body: map[string]any{
			"room_type_id": h.RoomTypeID, "number": fmt.Sprintf("D%02d", i+1), "floor": 1}}); r.Status != http.StatusCreated {
			w.t.Fatalf("room: %d %s", r.Status, r.Body)
		}
	}
	return h
}

func (w *world) roomType(region, hotelID, name string, total int, from, to string) string {
	w.t.Helper()
	env, admin := w.envs[region], w.envs[region].Admin()
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + hotelID + "/room-types", Token: admin, Body: map[string]any{
		"name": name, "max_guests": 2, "price_cents": 9000, "currency": "EUR", "overbooking_pct": 0}})
	if r.Status != http.StatusCreated {
		w.t.Fatalf("room type: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["room_type_id"].(string)
	if r := env.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + hotelID + "/room-types/" + id + "/inventory", Token: admin,
		Body: map[string]any{"from": from, "to": to, "total_rooms": total}}); r.Status != http.StatusOK {
		w.t.Fatalf("inventory: %d %s", r.Status, r.Body)
	}
	return id
}

// arrive holds and confirms a stay from today for nights nights through
// the router and returns the guest and the stay.
func (w *world) arrive(ctx context.Context, h bookingtest.Hotel, nights int) (guest, stay string, err error) {
	admin := w.router.Admin()
	guest = "walker-" + uuid.NewString()[:8]
	today := time.Now().In(w.loc)
	r, err := w.router.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin,
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID,
			"check_in": today.Format(time.DateOnly), "check_out": today.AddDate(0, 0, nights).Format(time.DateOnly), "quantity": 1}})
	if err != nil || r.Status != http.StatusCreated {
		return "", "", fmt.Errorf("hold: %v %d %s", err, r.Status, r.Body)
	}
	stay = r.JSON()["reservation_id"].(string)
	r, err = w.router.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + stay + "/confirm",
		Token: admin, IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "desk"}})
	if err != nil || r.Status != http.StatusOK {
		return "", "", fmt.Errorf("confirm: %v %d %s", err, r.Status, r.Body)
	}
	return guest, stay, nil
}

// desk sends one desk action through the router.
func (w *world) desk(ctx context.Context, hotelID, stay, action string, body map[string]any) (bookingtest.Response, error) {
	return w.router.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + hotelID + "/reservations/" + stay + "/" + action,
		Token: w.router.Admin(), IdemKey: bookingtest.NewKey(), Body: body})
}

// status reads a stay's status.
func (w *world) status(ctx context.Context, stay string) string {
	w.t.Helper()
	var s string
	if err := dbtest.SQL(w.db).QueryRow(ctx, `SELECT status FROM reservations WHERE reservation_id = $1`, stay).Scan(&s); err != nil {
		w.t.Fatal(err)
	}
	return s
}

// auditGuest checks one relocated guest: exactly one live stay; walked
// with exactly one confirmed stay at sister linked to it and one held
// outcome, or (undone) confirmed with no relocated stay and one refused
// outcome when it was relocated at all. It returns the original's status.
func (w *world) auditGuest(ctx context.Context, guest, stay, sister string) (string, error) {
	var live, relocated, atSister, outcomes int
	var status string
	err := dbtest.SQL(w.db).QueryRow(ctx, `SELECT
		(SELECT count(*) FROM reservations WHERE guest_id = $1 AND status IN ('held', 'confirmed', 'checked_in', 'walking')),
		(SELECT count(*) FROM reservations WHERE relocated_from_reservation_id = $2),
		(SELECT count(*) FROM reservations WHERE relocated_from_reservation_id = $2 AND hotel_id::TEXT = $3 AND status = 'confirmed'),
		(SELECT count(*) FROM walk_outcomes WHERE from_reservation_id = $2),
		(SELECT status FROM reservations WHERE reservation_id = $2)`, guest, stay, sister).Scan(&live, &relocated, &atSister, &outcomes, &status)
	if err != nil {
		return "", err
	}
	switch {
	case live != 1:
		return status, fmt.Errorf("guest %s: %d live stays (original %s)", guest, live, status)
	case status == "walked" && (relocated != 1 || atSister != 1 || outcomes != 1):
		return status, fmt.Errorf("guest %s walked: %d relocated stays, %d confirmed at the sister, %d outcomes; want 1, 1, 1", guest, relocated, atSister, outcomes)
	case status == "confirmed" && relocated != 0:
		return status, fmt.Errorf("guest %s confirmed at the original, yet %d relocated stays", guest, relocated)
	case status == "walking":
		return status, fmt.Errorf("guest %s: still walking", guest)
	}
	return status, nil
}

// invariants runs the hotel checks of booking verify and checks that every
// row of the given hotels followed its partition to its home.
func (w *world) invariants(ctx context.Context, hotels ...string) {
	w.t.Helper()
	v, err := bookingtest.Violations(ctx, w.db, nil, append(postgres.HotelInvariants, postgres.CheckReservationEvent)...)
	if err != nil {
		w.t.Fatal(err)
	}
	if len(v) > 0 {
		w.t.Fatalf("invariants: %v", v)
	}
	for _, h := range hotels {
		var stray int
		if err := dbtest.SQL(w.db).QueryRow(ctx, `SELECT
			(SELECT count(*) FROM reservations r WHERE r.hotel_id = p.partition_id AND r.home_region <> p.home_region) +
			(SELECT count(*) FROM room_inventory i WHERE i.hotel_id = p.partition_id AND i.home_region <> p.home_region) +
			(SELECT count(*) FROM walk_outcomes o WHERE o.hotel_id = p.partition_id AND o.home_region <> p.home_region) +
			(SELECT count(*) FROM outbox x WHERE x.partition_id = p.partition_id AND x.home_region <> p.home_region)
			FROM placements p WHERE p.kind = 'hotel' AND p.partition_id = $1`, h).Scan(&stray); err != nil {
			w.t.Fatal(err)
		}
		if stray > 0 {
			w.t.Errorf("hotel %s: %d rows not homed where its placement is", h, stray)
		}
	}
}

// A saga step that every region skips because the partition it is for
// moved between the regions' consumers: the new home's consumer saw the
// message while the old home was still home (421), the old home's after
// the move (421). Nothing handles it again by itself — the test shows the
// walk stuck — until the resume-walks job of the original's home region
// asks again; then the guest ends walked with exactly one live stay.
// Once for the request (the sister moves) and once for the answer (the
// original moves).
func TestWalkStepSkippedByEveryRegionIsResumed(t *testing.T) {
	t.Parallel()
	for _, moved := range []string{"sister", "original"} {
		t.Run(moved+" moves", func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			w := newWorld(t)
			orig := w.chainHotel("us-east", "Original", 5, 0)
			sister := w.chainHotel("eu-west", "Sister", 5, 0)
			guest, stay, err := w.arrive(ctx, orig, 2)
			if err != nil {
				t.Fatal(err)
			}
			r, err := w.desk(ctx, orig.ID, stay, "relocate", map[string]any{"hotel_id": sister.ID})
			if err != nil || r.Status != http.StatusAccepted {
				t.Fatalf("relocate: %v %d %s", err, r.Status, r.Body)
			}
			home := "us-east" // where the original is homed at the end
			if moved == "sister" {
				// ap-south sees the request while the sister is homed in
				// eu-west; then the sister moves to ap-south; then eu-west
				// and us-east see it: 421 everywhere.
				w.startConsumer("ap-south")
				w.drain(ctx, "ap-south")
				w.stopConsumer("ap-south")
				w.move(ctx, sister.ID, "ap-south")
				w.startConsumer("eu-west")
				w.startConsumer("us-east")
				w.drain(ctx, "eu-west", "us-east")
				var outcomes int
				if err := dbtest.SQL(w.db).QueryRow(ctx, `SELECT count(*) FROM walk_outcomes WHERE from_reservation_id = $1`, stay).Scan(&outcomes); err != nil {
					t.Fatal(err)
				}
				if outcomes != 0 {
					t.Fatalf("the request was handled (%d outcomes): the step was not skipped everywhere", outcomes)
				}
			} else {
				// eu-west holds at the sister and its answer reaches eu-west
				// (421: the original is in us-east); ap-south sees both
				// (421); the original moves to ap-south; us-east sees both
				// (421 again).
				w.startConsumer("eu-west")
				w.drain(ctx, "eu-west")
				w.stopConsumer("eu-west")
				w.startConsumer("ap-south")
				w.drain(ctx, "ap-south")
				w.stopConsumer("ap-south")
				w.move(ctx, orig.ID, "ap-south")
				home = "ap-south"
				w.startConsumer("us-east")
				w.drain(ctx, "us-east")
				var held int
				if err := dbtest.SQL(w.db).QueryRow(ctx, `SELECT count(*) FROM reservations WHERE relocated_from_reservation_id = $1`, stay).Scan(&held); err != nil {
					t.Fatal(err)
				}
				if held != 1 {
					t.Fatalf("%d stays held at the sister; want 1 before the answer is lost", held)
				}
			}
			for _, region := range berth.Regions() {
				w.startConsumer(region)
			}
			w.drain(ctx, berth.Regions()...)
			if s := w.status(ctx, stay); s != "walking" {
				t.Fatalf("the original is %s before the resumer ran: the skip did not happen", s)
			}
			// Only the original's home resumes it (the others' fence).
			for _, region := range berth.Regions() {
				if _, err := dbtest.SQL(w.db).Exec(ctx, `UPDATE reservations SET updated_at = now() - INTERVAL '1 hour' WHERE reservation_id = $1`, stay); err != nil {
					t.Fatal(err)
				}
				n, err := w.envs[region].Store.ResumeWalks(ctx, time.Minute, 10)
				want := 0
				if region == home {
					want = 1
				}
				if err != nil || n != want {
					t.Fatalf("resume in %s: %d, %v; want %d", region, n, err, want)
				}
			}
			waitFor(ctx, t, "the resumed walk to finish", func() bool { return w.status(ctx, stay) == "walked" })
			w.drain(ctx, berth.Regions()...)
			if _, err := w.auditGuest(ctx, guest, stay, sister.ID); err != nil {
				t.Fatal(err)
			}
			w.stop()
			w.invariants(ctx, orig.ID, sister.ID)
		})
	}
}

// Relocations in flight while the original hotel and both sisters move
// between the three regions every 100 ms: the desk
// checks arriving guests in through a router (two rooms for many guests),
// upgrades some to the two suites and relocates the rest to a sister (one
// with room for all, one with room for a few, whose later walks are
// undone), while every region's walk consumer and resume-walks job run.
// Afterwards, with nothing left walking: every guest has exactly one live
// stay — walked with one confirmed stay at the sister, or confirmed again
// at the original, or checked in — no room is assigned twice, the hotel
// invariants of booking verify hold and every row is homed with its
// partition.
func TestRelocationsWhilePartitionsMove(t *testing.T) {
	if testing.Short() {
		t.Skip("moves under load")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newWorld(t)
	const guests = 36
	orig := w.chainHotel("us-east", "Original", guests, 2)
	today := time.Now().In(w.loc)
	suite := w.roomType("us-east", orig.ID, "Suite", 2, today.AddDate(0, 0, -1).Format(time.DateOnly), today.AddDate(0, 0, 4).Format(time.DateOnly))
	for i := range 2 {
		if r := w.envs["us-east"].Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + orig.ID + "/rooms", Token: w.router.Admin(),
			Body: map[string]any{"room_type_id": suite, "number": fmt.Sprintf("S%02d", i+1), "floor": 2}}); r.Status != http.StatusCreated {
			t.Fatalf("suite room: %d %s", r.Status, r.Body)
		}
	}
	big := w.chainHotel("eu-west", "Big sister", guests, 0)
	small := w.chainHotel("ap-south", "Small sister", 4, 0)
	hotels := []string{orig.ID, big.ID, small.ID}

	type arrival struct{ guest, stay, sister, outcome string }
	arrivals := make([]arrival, 0, guests)
	for range guests {
		g, s, err := w.arrive(ctx, orig, 1+rand.IntN(2))
		if err != nil {
			t.Fatal(err)
		}
		arrivals = append(arrivals, arrival{guest: g, stay: s})
	}
	for _, region := range berth.Regions() {
		w.startConsumer(region)
	}
	// Every region's resume-walks job, with a short wait: the moves make
	// lost steps likely, and the test waits for them.
	jobsCtx, stopJobs := context.WithCancel(ctx)
	var jobs sync.WaitGroup
	var resumed atomic.Int64
	for _, region := range berth.Regions() {
		jobs.Go(func() {
			postgres.Every(jobsCtx, 300*time.Millisecond, func(ctx context.Context) {
				n, _ := w.envs[region].Store.ResumeWalks(ctx, time.Second, 100)
				resumed.Add(int64(n))
			})
		})
	}
	defer func() { stopJobs(); jobs.Wait() }()

	// The mover: one of the three hotels to another region every 100 ms
	// until the desk is done.
	deskDone := make(chan struct{})
	var moves, walkingAtMove atomic.Int64
	var mover sync.WaitGroup
	mover.Go(func() {
		rng := rand.New(rand.NewPCG(7, 11))
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-deskDone:
				return
			case <-tick.C:
			}
			h := hotels[rng.IntN(len(hotels))]
			to := berth.Regions()[rng.IntN(3)]
			res, err := w.place.MovePlacement(ctx, berth.KindHotel, h, to)
			if err != nil {
				t.Errorf("move: %v", err)
				return
			}
			if res.Moved {
				moves.Add(1)
				var n int
				if dbtest.SQL(w.db).QueryRow(ctx, `SELECT count(*) FROM reservations WHERE status = 'walking'`).Scan(&n) == nil && n > 0 {
					walkingAtMove.Add(1)
				}
			}
		}
	})

	// The desk: four clerks, each guest a check-in, then (no room) an
	// upgrade for every third, then a relocation.
	var next atomic.Int64
	var desk sync.WaitGroup
	var deskErrs atomic.Int64
	for clerk := range 4 {
		desk.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(clerk), 3))
			for {
				i := int(next.Add(1)) - 1
				if i >= len(arrivals) {
					return
				}
				a := &arrivals[i]
				fail := func(what string, r bookingtest.Response, err error) {
					deskErrs.Add(1)
					t.Errorf("guest %d %s: %v %d %s", i, what, err, r.Status, r.Body)
				}
				r, err := w.desk(ctx, orig.ID, a.stay, "check-in", map[string]any{})
				if err == nil && r.Status == http.StatusOK {
					a.outcome = "checked_in"
					continue
				}
				if err != nil || r.Code() != "no_room_free" {
					fail("check-in", r, err)
					continue
				}
				if i%3 == 0 {
					r, err = w.desk(ctx, orig.ID, a.stay, "upgrade", map[string]any{"room_type_id": suite})
					if err == nil && r.Status == http.StatusOK {
						a.outcome = "upgraded"
						continue
					}
					if err != nil || r.Code() != "no_room_free" {
						fail("upgrade", r, err)
						continue
					}
				}
				a.sister = big.ID
				if rng.IntN(3) == 0 {
					a.sister = small.ID
				}
				r, err = w.desk(ctx, orig.ID, a.stay, "relocate", map[string]any{"hotel_id": a.sister})
				if err != nil || r.Status != http.StatusAccepted {
					fail("relocate", r, err)
					continue
				}
				a.outcome = "relocating"
				// A pause between guests keeps the walks spread over the moves.
				time.Sleep(time.Duration(200+rng.IntN(200)) * time.Millisecond)
			}
		})
	}
	desk.Wait()
	close(deskDone)
	mover.Wait()
	if deskErrs.Load() > 0 {
		t.FailNow()
	}

	// Settle: nothing walking, every message sent and handled.
	waitFor(ctx, t, "every walk to finish", func() bool {
		var n int
		return dbtest.SQL(w.db).QueryRow(ctx, `SELECT count(*) FROM reservations WHERE status = 'walking'`).Scan(&n) == nil && n == 0
	})
	w.drain(ctx, berth.Regions()...)
	stopJobs()
	jobs.Wait()
	w.stop()

	counts := map[string]int{}
	for _, a := range arrivals {
		if a.outcome != "relocating" {
			counts[a.outcome]++
			if _, err := w.auditGuest(ctx, a.guest, a.stay, ""); err != nil {
				t.Error(err)
			}
			continue
		}
		status, err := w.auditGuest(ctx, a.guest, a.stay, a.sister)
		if err != nil {
			t.Error(err)
		}
		counts[status]++
	}
	w.invariants(ctx, hotels...)
	t.Logf("%d guests: %v; %d moves, %d of them with a walk in flight; %d walks resumed", guests, counts, moves.Load(), walkingAtMove.Load(), resumed.Load())
	if counts["walked"] == 0 || counts["confirmed"] == 0 || counts["upgraded"] == 0 || counts["checked_in"] == 0 {
		t.Errorf("the run did not exercise every path: %v", counts)
	}
	if moves.Load() < 5 {
		t.Errorf("only %d moves: the test did not exercise moving", moves.Load())
	}
}
