package router_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// loadDuration is 20 s by default; BERTH_LONG_TESTS=1 makes it 60 s.
func loadDuration() time.Duration {
	if os.Getenv("BERTH_LONG_TESTS") != "" {
		return 60 * time.Second
	}
	return 20 * time.Second
}

// clientStats is what the booking clients saw.
type clientStats struct {
	mu        sync.Mutex
	byStatus  map[int]int
	created   map[string]string // reservation_id → the router it came through
	transport int
	fiveXX    []string
}

func (s *clientStats) record(status int, via, what string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byStatus[status]++
	if status >= 500 {
		s.fiveXX = append(s.fiveXX, fmt.Sprintf("%s via %s: %d %s", what, via, status, body))
	}
}

// Moves under load: clients hold and cancel through all three routers at a
// steady rate while the partition is moved around the regions every 2 s.
// Afterwards: no client saw a 5xx or a 421, every 201 exists in the
// database exactly once, and for every night reserved = the live
// reservations' quantities ≤ sell_limit.
func TestMovesUnderLoad(t *testing.T) {
	forLayoutsInTurn(t, func(t *testing.T, l layout) {
		if testing.Short() {
			t.Skip("load test")
		}
		p := startPlatform(t, platformOptions{layout: l})
		ctx := context.Background()
		const nights = 8
		h := p.seedHotel("us-east", 30, bookingtest.Date(1), bookingtest.Date(1+nights))
		// Warm the routers' directories so they start out right, then go stale.
		for _, d := range p.dirs {
			if _, _, err := d.Resolve(ctx, berth.KindHotel, h.ID); err != nil {
				t.Fatal(err)
			}
		}
		stats := &clientStats{byStatus: map[int]int{}, created: map[string]string{}}
		runFor := loadDuration()
		deadline := time.Now().Add(runFor)

		var wg sync.WaitGroup
		for w := range 6 {
			via := berth.Regions()[w%3]
			guest := fmt.Sprintf("load-guest-%d", w)
			token := p.guest(guest)
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			wg.Add(1)
			go func() {
				defer wg.Done()
				env := p.routers[via]
				var mine []string
				tick := time.NewTicker(25 * time.Millisecond)
				defer tick.Stop()
				for time.Now().Before(deadline) {
					<-tick.C
					req := bookingtest.Request{Method: "POST", Token: token, IdemKey: bookingtest.NewKey()}
					what := "hold"
					if len(mine) > 0 && rng.IntN(4) == 0 {
						what = "cancel"
						i := rng.IntN(len(mine))
						req.Path = "/v1/hotels/" + h.ID + "/reservations/" + mine[i] + "/cancel"
						mine = append(mine[:i], mine[i+1:]...)
					} else {
						in := 1 + rng.IntN(nights-2)
						req.Path = "/v1/hotels/" + h.ID + "/reservations"
						req.Body = holdBody(guest, h, bookingtest.Date(in), bookingtest.Date(in+1+rng.IntN(3)), 1+rng.IntN(2))
					}
					// A client retries a transport error with the same key (the
					// router never should need it; counted below).
					var (
						r   bookingtest.Response
						err error
					)
					for attempt := 0; attempt < 3; attempt++ {
						if r, err = env.Try(ctx, req); err == nil {
							break
						}
						stats.mu.Lock()
						stats.transport++
						stats.mu.Unlock()
					}
					if err != nil {
						continue
					}
					stats.record(r.Status, via, what, r.Body)
					if what == "hold" && r.Status == http.StatusCreated {
						id, _ := r.JSON()["reservation_id"].(string)
						mine = append(mine, id)
						stats.mu.Lock()
						stats.created[id] = via
						stats.mu.Unlock()
					}
				}
			}()
		}

		// The mover: every 2 s, move the hotel to the next region, each time
		// through a different router (a move is served by the local booking service).
		moves, moveFailures := 0, []string{}
		every := time.NewTicker(2 * time.Second)
		defer every.Stop()
		for i := 1; time.Now().Add(2 * time.Second).Before(deadline); i++ {
			<-every.C
			to := berth.Regions()[i%3]
			r, err := p.routers[berth.Regions()[(i+1)%3]].Try(ctx, bookingtest.Request{Method: "POST",
				Path: "/v1/placements/hotel/" + h.ID + "/move", Token: p.ops(), Body: map[string]any{"to_region": to}})
			if err != nil || r.Status != http.StatusOK {
				moveFailures = append(moveFailures, fmt.Sprintf("move to %s: %v %d %s", to, err, r.Status, r.Body))
				continue
			}
			moves++
		}
		wg.Wait()

		t.Logf("%s of load: %d moves; client answers by status %v; %d reservations created; %d transport errors",
			runFor, moves, stats.byStatus, len(stats.created), stats.transport)
		var misdirected int
		for region, env := range p.routers {
			m := env.Do(bookingtest.Request{Method: "GET", Path: "/metrics"})
			for _, line := range strings.Split(string(m.Body), "\n") {
				if strings.HasPrefix(line, "berth_router_misdirected_total ") {
					var n int
					fmt.Sscan(strings.TrimPrefix(line, "berth_router_misdirected_total "), &n)
					misdirected += n
					t.Logf("router %s: %s", region, line)
				}
			}
		}
		if len(stats.fiveXX) > 0 {
			t.Errorf("clients saw %d 5xx answers, first: %s", len(stats.fiveXX), stats.fiveXX[0])
		}
		if stats.transport > 0 {
			t.Errorf("clients saw %d transport errors", stats.transport)
		}
		if len(moveFailures) > 0 {
			t.Errorf("%d moves failed, first: %s", len(moveFailures), moveFailures[0])
		}
		if moves < 3 {
			t.Errorf("only %d moves: the test did not exercise moving", moves)
		}
		if stats.byStatus[http.StatusCreated] == 0 || misdirected == 0 {
			t.Errorf("the test did not exercise what it should: %d holds, %d re-sent 421s", stats.byStatus[http.StatusCreated], misdirected)
		}
		if n := stats.byStatus[http.StatusMisdirectedRequest]; n > 0 {
			t.Errorf("clients saw %d 421 answers: the routers must follow every move", n)
		}
		ids := make([]string, 0, len(stats.created))
		for id := range stats.created {
			ids = append(ids, id)
		}
		auditHotel(t, p, h.ID, ids, nights)
	})
}

// auditHotel checks from the database, after a run: every reservation the
// clients were answered 201 for exists exactly once and nothing else was
// committed; the invariant holds on every night (the checks of booking
// verify); and every row of the partition followed it to its final home.
func auditHotel(t *testing.T, p *platform, hotelID string, created []string, nights int) {
	t.Helper()
	ctx := context.Background()
	var found, total, inventory int
	if err := dbtest.SQL(p.db).QueryRow(ctx, `SELECT
		(SELECT count(*) FROM reservations WHERE hotel_id = $1 AND reservation_id = ANY($2::UUID[])),
		(SELECT count(*) FROM reservations WHERE hotel_id = $1),
		(SELECT count(DISTINCT night) FROM room_inventory WHERE hotel_id = $1)`, hotelID, created).Scan(&found, &total, &inventory); err != nil {
		t.Fatal(err)
	}
	if found != len(created) || total != len(created) {
		t.Errorf("%d distinct 201s; %d of them in the database, %d reservations in total", len(created), found, total)
	}
	if inventory != nights {
		t.Errorf("%d nights of inventory, want %d", inventory, nights)
	}
	violations, err := bookingtest.InventoryViolations(ctx, p.db)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range violations {
		t.Error("invariant violated: " + v)
	}
	var home string
	if err := dbtest.SQL(p.db).QueryRow(ctx, `SELECT home_region FROM placements WHERE kind = 'hotel' AND partition_id = $1`, hotelID).Scan(&home); err != nil {
		t.Fatal(err)
	}
	var stray int
	if err := dbtest.SQL(p.db).QueryRow(ctx, `SELECT
		(SELECT count(*) FROM reservations WHERE hotel_id = $1 AND home_region <> $2) +
		(SELECT count(*) FROM room_inventory WHERE hotel_id = $1 AND home_region <> $2) +
		(SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND home_region <> $2) +
		(SELECT count(*) FROM outbox WHERE partition_id = $1 AND home_region <> $2)`, hotelID, home).Scan(&stray); err != nil {
		t.Fatal(err)
	}
	if stray != 0 {
		t.Errorf("%d rows of the partition are not homed in its home %s", stray, home)
	}
}

// A hotel moved back and forth between two regions 20 times while 200 holds
// go through all three routers: no client sees a 421 (nor a 5xx), and the
// database agrees with the answers. The moves are interleaved with the
// holds, not timed: move i waits until 10·i holds have started, and hold k
// waits until at least k/10 − 2 moves are done, so every move lands among
// holds in flight whatever the machine's speed. The routers learn of moves
// only through 421s (no event stream here), so every move sends the next
// writes of each router to the old home first.
func TestBackAndForthMovesDuringHolds(t *testing.T) {
	forLayoutsInTurn(t, func(t *testing.T, l layout) {
		const (
			holds   = 200
			flips   = 20
			workers = 8
			nights  = 8
		)
		p := startPlatform(t, platformOptions{layout: l})
		ctx := context.Background()
		h := p.seedHotel("us-east", 100, bookingtest.Date(1), bookingtest.Date(1+nights))
		for _, d := range p.dirs {
			if _, _, err := d.Resolve(ctx, berth.KindHotel, h.ID); err != nil {
				t.Fatal(err)
			}
		}
		var (
			started, moved atomic.Int64
			progress       = make(chan struct{}, holds+flips)
			stats          = &clientStats{byStatus: map[int]int{}, created: map[string]string{}}
			errs           []string
			errsMu         sync.Mutex
		)
		fail := func(format string, args ...any) {
			errsMu.Lock()
			errs = append(errs, fmt.Sprintf(format, args...))
			errsMu.Unlock()
		}
		// wait blocks until cond holds; progress is signalled on every start and
		// every move, so nobody polls.
		var condMu sync.Mutex
		cond := sync.NewCond(&condMu)
		go func() {
			for range progress {
				condMu.Lock()
				cond.Broadcast()
				condMu.Unlock()
			}
		}()
		defer close(progress)
		wait := func(ok func() bool) {
			condMu.Lock()
			for !ok() {
				cond.Wait()
			}
			condMu.Unlock()
		}

		var wg sync.WaitGroup
		for w := range workers {
			via := berth.Regions()[w%3]
			guest := fmt.Sprintf("flip-guest-%d", w)
			token := p.guest(guest)
			rng := rand.New(rand.NewPCG(uint64(w), 16))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					k := started.Load()
					if k >= holds {
						return
					}
					wait(func() bool { return moved.Load() >= k/10-2 })
					if !started.CompareAndSwap(k, k+1) {
						continue
					}
					progress <- struct{}{}
					in := 1 + rng.IntN(nights-2)
					r, err := p.routers[via].Try(ctx, bookingtest.Request{Method: "POST", Token: token, IdemKey: bookingtest.NewKey(),
						Path: "/v1/hotels/" + h.ID + "/reservations",
						Body: holdBody(guest, h, bookingtest.Date(in), bookingtest.Date(in+1+rng.IntN(2)), 1)})
					if err != nil {
						fail("hold via %s: %v", via, err)
						continue
					}
					stats.record(r.Status, via, "hold", r.Body)
					if r.Status == http.StatusMisdirectedRequest {
						fail("hold via %s: 421 reached the client: %s", via, r.Body)
					}
					if r.Status == http.StatusCreated {
						id, _ := r.JSON()["reservation_id"].(string)
						stats.mu.Lock()
						stats.created[id] = via
						stats.mu.Unlock()
					}
				}
			}()
		}
		placements := postgres.NewPlacements(p.db)
		for i := 1; i <= flips; i++ {
			wait(func() bool { return started.Load() >= int64(10*i) })
			to := []string{"eu-west", "us-east"}[(i-1)%2]
			var err error
			for attempt := 0; attempt < 5; attempt++ {
				if _, err = placements.MovePlacement(ctx, berth.KindHotel, h.ID, to); err == nil || berth.ErrorCode(err) != berth.CodeUnavailable {
					break
				}
			}
			if err != nil {
				t.Errorf("move %d to %s: %v", i, to, err)
			}
			moved.Add(1)
			progress <- struct{}{}
		}
		wg.Wait()

		followed, chains := 0, 0
		for region := range p.routers {
			followed += p.metric(region, "berth_router_misdirected_total")
			chains += p.metric(region, "berth_router_misdirected_chains_total")
		}
		t.Logf("%d holds, %d moves: answers by status %v; the routers followed %d 421s, %d requests more than one",
			started.Load(), moved.Load(), stats.byStatus, followed, chains)
		for _, e := range errs {
			t.Error(e)
		}
		if len(stats.fiveXX) > 0 {
			t.Errorf("clients saw %d 5xx answers, first: %s", len(stats.fiveXX), stats.fiveXX[0])
		}
		answered := 0
		for _, n := range stats.byStatus {
			answered += n
		}
		if answered != holds || moved.Load() != flips {
			t.Errorf("%d holds answered, %d moves made; want %d and %d", answered, moved.Load(), holds, flips)
		}
		if followed == 0 || stats.byStatus[http.StatusCreated] == 0 {
			t.Errorf("the test did not exercise what it should: %d 201s, %d 421s followed", stats.byStatus[http.StatusCreated], followed)
		}
		ids := make([]string, 0, len(stats.created))
		for id := range stats.created {
			ids = append(ids, id)
		}
		auditHotel(t, p, h.ID, ids, nights)
	})
}
