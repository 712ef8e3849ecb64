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
)

// homeCheckSQL makes the database itself refuse, at COMMIT, any row of a
// partition written with a home_region that is not the partition's home at
// that moment: a deferred constraint trigger on every table a hold writes.
// A region that wrote a partition it no longer owns would trip it.
var homeCheckSQL = []string{
	`CREATE FUNCTION test_home_check() RETURNS trigger LANGUAGE plpgsql AS $$
	 DECLARE home TEXT;
	 BEGIN
	   SELECT home_region INTO home FROM placements WHERE partition_id = (to_jsonb(NEW) ->> TG_ARGV[0])::UUID;
	   IF home IS DISTINCT FROM NEW.home_region THEN
	     RAISE EXCEPTION 'a row of % written by % committed while the partition is homed in %', TG_TABLE_NAME, NEW.home_region, home;
	   END IF;
	   RETURN NULL;
	 END $$`,
	`CREATE CONSTRAINT TRIGGER home_check AFTER INSERT OR UPDATE ON reservations DEFERRABLE INITIALLY DEFERRED
	 FOR EACH ROW EXECUTE FUNCTION test_home_check('hotel_id')`,
	`CREATE CONSTRAINT TRIGGER home_check AFTER INSERT OR UPDATE ON room_inventory DEFERRABLE INITIALLY DEFERRED
	 FOR EACH ROW EXECUTE FUNCTION test_home_check('hotel_id')`,
	`CREATE CONSTRAINT TRIGGER home_check AFTER INSERT OR UPDATE ON guest_holds DEFERRABLE INITIALLY DEFERRED
	 FOR EACH ROW EXECUTE FUNCTION test_home_check('hotel_id')`,
	`CREATE CONSTRAINT TRIGGER home_check AFTER INSERT OR UPDATE ON idempotency_keys DEFERRABLE INITIALLY DEFERRED
	 FOR EACH ROW EXECUTE FUNCTION test_home_check('partition_id')`,
	`CREATE CONSTRAINT TRIGGER home_check AFTER INSERT OR UPDATE ON outbox DEFERRABLE INITIALLY DEFERRED
	 FOR EACH ROW EXECUTE FUNCTION test_home_check('partition_id')`,
}

// A hold takes no placement row: the nights it takes are its fence. Holds
// from all three regions' stores — as stale routers would send them — race a
// hotel moved between the regions every few milliseconds, winners and
// losers (a sold-out room type, whose refusals store their answer) alike.
// No row may commit from a region that is not the hotel's home at that
// commit, every hold is answered 201, 409 sold_out or 421, every 201 exists,
// every row ends homed where the placement says, and the inventory adds up.
func TestStaleRegionCannotWriteAMovedHotel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	h := env.SeedHotel("", 10_000, 0, bookingtest.Date(1), bookingtest.Date(12))
	admin := env.Admin()
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/room-types", Token: admin, Body: map[string]any{
		"name": "Suite", "max_guests": 2, "price_cents": 50000, "currency": "EUR", "overbooking_pct": 0}})
	if r.Status != http.StatusCreated {
		t.Fatalf("room type: %d %s", r.Status, r.Body)
	}
	full := r.JSON()["room_type_id"].(string)
	r = env.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + h.ID + "/room-types/" + full + "/inventory", Token: admin,
		Body: map[string]any{"from": bookingtest.Date(1), "to": bookingtest.Date(12), "total_rooms": 0}})
	if r.Status != http.StatusOK {
		t.Fatalf("inventory: %d %s", r.Status, r.Body)
	}
	for _, q := range homeCheckSQL {
		if _, err := dbtest.SQL(env.DB).Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	stores := map[string]*postgres.Store{}
	for _, region := range berth.Regions() {
		stores[region] = postgres.NewStore(env.DB, region, 10*time.Minute)
	}
	first, _ := reservation.ParseDate(bookingtest.Date(1))

	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		winners  = map[string]int{} // region → holds it won
		created  []string
		failures []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				region := berth.Regions()[rng.IntN(len(berth.Regions()))]
				rt := h.RoomTypeID
				if rng.IntN(4) == 0 {
					rt = full
				}
				in := first.AddDays(rng.IntN(8))
				req := reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: rt, GuestID: "g-" + uuid.NewString(),
					Stay: reservation.Stay{CheckIn: in, CheckOut: in.AddDays(1 + rng.IntN(3))}, Quantity: 1}
				idem := &berth.Idem{Key: uuid.NewString(), Hash: "h", Render: func(v any, err error) (int, []byte) {
					if err != nil {
						return http.StatusConflict, []byte(berth.ErrorCode(err))
					}
					return http.StatusCreated, []byte(`{}`)
				}}
				resp, err := stores[region].Hold(ctx, req, idem)
				mu.Lock()
				switch {
				case err == nil && resp.Status == http.StatusCreated:
					outcomes["201"]++
					winners[region]++
					created = append(created, req.ReservationID)
				case err == nil && resp.Status == http.StatusConflict && string(resp.Body) == string(berth.CodeSoldOut):
					outcomes["409 sold_out"]++
				case berth.ErrorCode(err) == berth.CodeMisdirected:
					outcomes["421"]++
				case berth.ErrorCode(err) == berth.CodeUnavailable:
					// Busy (a lock wait past lock_timeout): the client retries.
					outcomes["503"]++
				default:
					failures = append(failures, fmt.Sprintf("%s via %s: %d %s %v", rt, region, resp.Status, resp.Body, err))
				}
				mu.Unlock()
			}
		})
	}
	placements := postgres.NewPlacements(env.DB)
	moves := 0
	for i := range 30 {
		time.Sleep(time.Duration(20+rand.IntN(40)) * time.Millisecond)
		to := berth.Regions()[(i+1)%len(berth.Regions())]
		if _, err := placements.MovePlacement(ctx, berth.KindHotel, h.ID, to); err != nil {
			t.Errorf("move %d to %s: %v", i, to, err)
			continue
		}
		moves++
	}
	close(stop)
	wg.Wait()

	t.Logf("%d moves; outcomes %v; winners by region %v", moves, outcomes, winners)
	for region, s := range stores {
		t.Logf("hold batching in %s: %+v", region, s.HoldBatchStats())
	}
	for _, f := range failures {
		t.Error(f)
	}
	if outcomes["201"] == 0 || outcomes["409 sold_out"] == 0 || outcomes["421"] == 0 || len(winners) < 2 {
		t.Errorf("the race did not exercise every path: %v, winners %v", outcomes, winners)
	}
	var found int
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM reservations WHERE hotel_id = $1 AND reservation_id = ANY($2::UUID[])`,
		h.ID, created).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if found != len(created) {
		t.Errorf("%d holds answered 201, %d of them exist", len(created), found)
	}
	pl, err := placements.GetPlacement(ctx, berth.KindHotel, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT count(*) FROM hotels WHERE hotel_id = $1 AND home_region <> $2`,
		`SELECT count(*) FROM room_types WHERE hotel_id = $1 AND home_region <> $2`,
		`SELECT count(*) FROM room_inventory WHERE hotel_id = $1 AND home_region <> $2`,
		`SELECT count(*) FROM reservations WHERE hotel_id = $1 AND home_region <> $2`,
		`SELECT count(*) FROM guest_holds WHERE hotel_id = $1 AND home_region <> $2`,
		`SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND home_region <> $2`,
		`SELECT count(*) FROM outbox WHERE partition_id = $1 AND home_region <> $2`,
	} {
		var n int
		if err := dbtest.SQL(env.DB).QueryRow(ctx, q, h.ID, pl.HomeRegion).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows left behind, not homed in %s: %s", n, pl.HomeRegion, q)
		}
	}
	env.AssertInventory()
}
