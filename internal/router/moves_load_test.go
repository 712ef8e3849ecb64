package router_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
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
// Afterwards: no client saw a 5xx, every 201 exists in the database exactly
// once, and for every night reserved = the live reservations' quantities ≤
// sell_limit.
func TestMovesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	p := startPlatform(t, platformOptions{})
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
		via := berth.Regions[w%3]
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
		to := berth.Regions[i%3]
		r, err := p.routers[berth.Regions[(i+1)%3]].Try(ctx, bookingtest.Request{Method: "POST",
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
		t.Logf("note: %d requests met two moves in a row and answered 421 to the client", n)
	}

	// Every 201 exists exactly once, and nothing else was committed.
	ids := make([]string, 0, len(stats.created))
	for id := range stats.created {
		ids = append(ids, id)
	}
	var found, total int
	if err := p.db.Pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE hotel_id = $1 AND reservation_id = ANY($2::UUID[])`, h.ID, ids).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if err := p.db.Pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE hotel_id = $1`, h.ID).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if found != len(ids) || total != len(ids) {
		t.Errorf("%d distinct 201s; %d of them in the database, %d reservations in total", len(ids), found, total)
	}

	// The invariant, night by night, from the database.
	rows, err := p.db.Pool.Query(ctx, `
		SELECT i.night::TEXT, i.reserved, i.sell_limit,
		       COALESCE((SELECT sum(r.quantity) FROM reservations r
		                 WHERE r.hotel_id = i.hotel_id AND r.room_type_id = i.room_type_id
		                   AND r.status IN ('held', 'confirmed') AND r.check_in <= i.night AND i.night < r.check_out), 0)
		FROM room_inventory i WHERE i.hotel_id = $1 ORDER BY i.night`, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	checked := 0
	for rows.Next() {
		var (
			night                string
			reserved, limit, sum int
		)
		if err := rows.Scan(&night, &reserved, &limit, &sum); err != nil {
			t.Fatal(err)
		}
		checked++
		if reserved != sum || reserved > limit {
			t.Errorf("night %s: reserved %d, live reservations sum %d, sell_limit %d", night, reserved, sum, limit)
		}
	}
	if checked != nights {
		t.Errorf("checked %d nights, want %d", checked, nights)
	}

	// All of the partition's rows followed it to its final home.
	var home string
	if err := p.db.Pool.QueryRow(ctx, `SELECT home_region FROM placements WHERE kind = 'hotel' AND partition_id = $1`, h.ID).Scan(&home); err != nil {
		t.Fatal(err)
	}
	var stray int
	if err := p.db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM reservations WHERE hotel_id = $1 AND home_region <> $2) +
		(SELECT count(*) FROM room_inventory WHERE hotel_id = $1 AND home_region <> $2) +
		(SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND home_region <> $2) +
		(SELECT count(*) FROM outbox WHERE partition_id = $1 AND home_region <> $2)`, h.ID, home).Scan(&stray); err != nil {
		t.Fatal(err)
	}
	if stray != 0 {
		t.Errorf("%d rows of the partition are not homed in its home %s", stray, home)
	}
}
