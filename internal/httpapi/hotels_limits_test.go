package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// holdModes run a race with hot-partition batching on (the default) and off
// (every hold its own transaction: the lone, pipelined hold).
var holdModes = []struct {
	name  string
	batch int
}{{"batched", postgres.DefaultHoldBatch}, {"alone", 0}}

// holdAs sends one hold of qty rooms for guest over nights [in, in+nights).
func holdAs(env *bookingtest.Env, ctx context.Context, h bookingtest.Hotel, guest, tok string, in, nights, qty int) (bookingtest.Response, error) {
	return env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
		Token: tok, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(in),
			"check_out": bookingtest.Date(in + nights), "quantity": qty}})
}

// raceHolds fires n holds of one guest at once (released together) and
// counts the outcomes as "status code".
func raceHolds(t *testing.T, env *bookingtest.Env, h bookingtest.Hotel, guest string, n, qty int) map[string]int {
	t.Helper()
	tok := env.Token(guest, berth.RoleGuest)
	var (
		mu      sync.Mutex
		outcome = map[string]int{}
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := holdAs(env, context.Background(), h, guest, tok, 5+i%20, 1+i%3, qty)
			key := "transport error: "
			if err == nil {
				key = fmt.Sprintf("%d %s", r.Status, r.Code())
				if r.Code() == "limit_exceeded" {
					// The limit travels in the body.
					body := r.JSON()
					key += fmt.Sprintf(" %v=%v", body["limit"], body["max"])
				}
			} else {
				key += err.Error()
			}
			mu.Lock()
			outcome[key]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return outcome
}

// liveHolds reads from the database how many held reservations a guest has
// in a hotel and how many rooms they take.
func liveHolds(t *testing.T, env *bookingtest.Env, hotelID, guest string) (holds, rooms int) {
	t.Helper()
	err := dbtest.SQL(env.DB).QueryRow(context.Background(),
		`SELECT count(*), COALESCE(sum(quantity), 0) FROM reservations WHERE hotel_id = $1 AND guest_id = $2 AND status = 'held'`,
		hotelID, guest).Scan(&holds, &rooms)
	if err != nil {
		t.Fatal(err)
	}
	return holds, rooms
}

// One guest fires 40 holds at once at a hotel with rooms to spare and a
// limit of 3 live holds per guest: exactly 3 win, every other answer is
// 409 limit_exceeded naming the limit, and the database holds exactly 3.
//
// With batching on (the default) and off: off, every hold is the lone
// pipelined transaction whose take counts the guest in the same statement.
func TestGuestHoldLimitRace(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		for _, mode := range holdModes {
			t.Run(string(iso)+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				env := bookingtest.Start(t, bookingtest.Options{DB: dbOptions(iso), GuestLimits: berth.GuestLimits{Holds: 3, Quantity: 50}})
				env.Store.SetHoldBatch(mode.batch)
				h := env.SeedHotel("", 100, 0, bookingtest.Date(1), bookingtest.Date(40))
				const n = 40
				outcome := raceHolds(t, env, h, "greedy", n, 1)
				t.Logf("%s: %v", iso, outcome)
				if outcome["201 "] != 3 || outcome["409 limit_exceeded holds_per_guest=3"] != n-3 {
					t.Fatalf("outcomes = %v, want 3 × 201 and %d × 409 limit_exceeded holds_per_guest=3", outcome, n-3)
				}
				if holds, _ := liveHolds(t, env, h.ID, "greedy"); holds != 3 {
					t.Fatalf("%d held reservations of the guest in the database, want 3", holds)
				}
				// Another guest is not held back by the greedy one.
				if r, err := holdAs(env, context.Background(), h, "other", env.Token("other", berth.RoleGuest), 5, 1, 1); err != nil || r.Status != http.StatusCreated {
					t.Fatalf("another guest's hold: %v %d %s", err, r.Status, r.Body)
				}
				env.AssertInventory()
			})
		}
	}
}

// The quantity cap: one guest fires 30 holds of 2 rooms at once with a cap
// of 9 rooms: exactly 4 win (8 rooms; a fifth would make 10).
func TestGuestQuantityCapRace(t *testing.T) {
	t.Parallel()
	for _, mode := range holdModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testGuestQuantityCapRace(t, mode.batch)
		})
	}
}

func testGuestQuantityCapRace(t *testing.T, batch int) {
	env := bookingtest.Start(t, bookingtest.Options{GuestLimits: berth.GuestLimits{Holds: 100, Quantity: 9}})
	env.Store.SetHoldBatch(batch)
	h := env.SeedHotel("", 100, 0, bookingtest.Date(1), bookingtest.Date(40))
	const n = 30
	outcome := raceHolds(t, env, h, "bulk", n, 2)
	if outcome["201 "] != 4 || outcome["409 limit_exceeded quantity_per_guest=9"] != n-4 {
		t.Fatalf("outcomes = %v, want 4 × 201 and %d × 409 limit_exceeded quantity_per_guest=9", outcome, n-4)
	}
	if holds, rooms := liveHolds(t, env, h.ID, "bulk"); holds != 4 || rooms != 8 {
		t.Fatalf("database: %d holds taking %d rooms, want 4 taking 8", holds, rooms)
	}
	// One hold larger than the cap on its own is refused as well.
	r, err := holdAs(env, context.Background(), h, "big", env.Token("big", berth.RoleGuest), 5, 1, 10)
	if err != nil || r.Status != http.StatusConflict || r.Code() != "limit_exceeded" {
		t.Fatalf("a 10-room hold under a 9-room cap: %v %d %s", err, r.Status, r.Body)
	}
	env.AssertInventory()
}

// A hold stops counting when it is confirmed, cancelled or expired by the
// sweeper; the limit is per hotel, and refusing changes nothing.
func TestGuestHoldLimitFollowsTransitions(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{GuestLimits: berth.GuestLimits{Holds: 1, Quantity: 50}})
	h := env.SeedHotel("", 10, 0, bookingtest.Date(1), bookingtest.Date(40))
	h2 := env.SeedHotel("", 10, 0, bookingtest.Date(1), bookingtest.Date(40))
	ctx := context.Background()
	tok, admin := env.Token("ann", berth.RoleGuest), env.Admin()
	path := "/v1/hotels/" + h.ID + "/reservations/"
	hold := func(hotel bookingtest.Hotel, want int) string {
		t.Helper()
		r, err := holdAs(env, ctx, hotel, "ann", tok, 10, 2, 1)
		if err != nil || r.Status != want {
			t.Fatalf("hold: %v %d %s, want %d", err, r.Status, r.Body, want)
		}
		if want == http.StatusConflict && r.Code() != "limit_exceeded" {
			t.Fatalf("hold past the limit: %s", r.Body)
		}
		id, _ := r.JSON()["reservation_id"].(string)
		return id
	}
	a := hold(h, http.StatusCreated)
	hold(h, http.StatusConflict)
	hold(h2, http.StatusCreated) // another hotel counts on its own
	if holds, _ := liveHolds(t, env, h.ID, "ann"); holds != 1 {
		t.Fatalf("%d holds after a refused one, want 1", holds)
	}
	if r := env.Do(bookingtest.Request{Method: "POST", Path: path + a + "/cancel", Token: tok, IdemKey: bookingtest.NewKey()}); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	b := hold(h, http.StatusCreated)
	if r := env.Do(bookingtest.Request{Method: "POST", Path: path + b + "/confirm", Token: admin, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"payment_ref": "desk-1"}}); r.Status != http.StatusOK {
		t.Fatalf("confirm: %d %s", r.Status, r.Body)
	}
	c := hold(h, http.StatusCreated) // a confirmed booking is not a hold
	hold(h, http.StatusConflict)
	// Let c lapse (database time is the only clock) and run the sweeper.
	if _, err := dbtest.SQL(env.DB).Exec(ctx, `UPDATE reservations SET hold_expires_at = now() - INTERVAL '1 minute'
		WHERE hotel_id = $1 AND reservation_id = $2`, h.ID, c); err != nil {
		t.Fatal(err)
	}
	if n, err := env.Store.ExpireHolds(ctx, 10); err != nil || n != 1 {
		t.Fatalf("sweeper: %d, %v", n, err)
	}
	hold(h, http.StatusCreated)
	// Cancelling the confirmed booking frees no hold: the guest is at the limit.
	if r := env.Do(bookingtest.Request{Method: "POST", Path: path + b + "/cancel", Token: tok, IdemKey: bookingtest.NewKey()}); r.Status != http.StatusOK {
		t.Fatalf("cancel confirmed: %d %s", r.Status, r.Body)
	}
	hold(h, http.StatusConflict)
	env.AssertInventory()
}
