package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/waitlist"
	"github.com/google/uuid"
)

func violations(t *testing.T, db *postgres.DB, o postgres.VerifyOptions) map[string]int {
	t.Helper()
	res, err := postgres.Verify(context.Background(), db, o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range res {
		if len(r.Violations) > 0 {
			out[r.Name] = len(r.Violations)
		}
	}
	return out
}

// Verify is clean on a consistent database and finds each kind of breach
// planted behind the application's back.
func TestVerifyFindsPlantedViolations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(20))
	admin := env.Admin()
	var ids []string
	for i := range 3 {
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin,
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID,
				"check_in": bookingtest.Date(3 + i), "check_out": bookingtest.Date(5 + i), "quantity": 1}})
		if r.Status != 201 {
			t.Fatalf("hold: %d %s", r.Status, r.Body)
		}
		ids = append(ids, r.JSON()["reservation_id"].(string))
	}
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + ids[0] + "/confirm",
		Token: admin, IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "p"}})
	if r.Status != 200 {
		t.Fatalf("confirm: %d %s", r.Status, r.Body)
	}
	if v := violations(t, env.DB, postgres.VerifyOptions{}); len(v) != 0 {
		t.Fatalf("a consistent database has violations: %v", v)
	}
	for _, stmt := range []string{
		// A night whose counter drifted from its reservations.
		`UPDATE room_inventory SET reserved = reserved + 1 WHERE hotel_id = '` + h.ID + `' AND night = '` + bookingtest.Date(10) + `'`,
		// A hold the sweeper never returned.
		`UPDATE reservations SET hold_expires_at = now() - INTERVAL '1 hour' WHERE reservation_id = '` + ids[1] + `'`,
		// A confirmation whose event vanished.
		`DELETE FROM outbox WHERE aggregate_id = '` + ids[0] + `' AND event_type = 'reservation.confirmed'`,
	} {
		if _, err := dbtest.SQL(env.DB).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	got := violations(t, env.DB, postgres.VerifyOptions{StaleHoldAfter: time.Minute})
	for _, name := range []string{"inventory_matches_reservations", "stale_hotel_holds", "confirmed_reservation_has_event"} {
		if got[name] != 1 {
			t.Errorf("%s: %d violations, want 1 (all: %v)", name, got[name], got)
		}
	}
	if other := violations(t, env.DB, postgres.VerifyOptions{Region: "eu-west"}); len(other) != 0 {
		t.Errorf("region filter leaks: %v", other)
	}
}

// The room checks find a room used twice on a night (planted with the
// unique key dropped, as an engine without it would allow), an assignment
// to a stay that does not occupy the night, a checked-in stay without its
// rooms, and an out-of-order count that drifted from the rooms.
func TestVerifyFindsPlantedRoomViolations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(20))
	rooms := env.SeedRooms(h, "2", 2)
	admin := env.Admin()
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin,
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(3), "check_out": bookingtest.Date(5), "quantity": 1}})
	if r.Status != 201 {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["reservation_id"].(string)
	r = env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/rooms/" + rooms[1] + "/out-of-order", Token: admin,
		Body: map[string]any{"from": bookingtest.Date(8), "to": bookingtest.Date(9), "reason": "x"}})
	if r.Status != 200 {
		t.Fatalf("out of order: %d %s", r.Status, r.Body)
	}
	if v := violations(t, env.DB, postgres.VerifyOptions{}); len(v) != 0 {
		t.Fatalf("a consistent database has violations: %v", v)
	}
	night := func(n int) string { return "'" + bookingtest.Date(n) + "'" }
	for _, stmt := range []string{
		`ALTER TABLE room_nights DROP CONSTRAINT room_nights_pkey`,
		// Room 1 given to the (merely confirmed) reservation on a night it
		// does not occupy, twice.
		`INSERT INTO room_nights (hotel_id, room_id, night, home_region, room_type_id, reservation_id)
		 VALUES ('` + h.ID + `', '` + rooms[0] + `', ` + night(10) + `, 'us-east', '` + h.RoomTypeID + `', '` + id + `'),
		        ('` + h.ID + `', '` + rooms[0] + `', ` + night(10) + `, 'us-east', '` + h.RoomTypeID + `', '` + id + `')`,
		// Room 2 out of order on night 9 without the count.
		`INSERT INTO room_nights (hotel_id, room_id, night, home_region, room_type_id, out_of_order_reason)
		 VALUES ('` + h.ID + `', '` + rooms[1] + `', ` + night(9) + `, 'us-east', '` + h.RoomTypeID + `', 'x')`,
		// A stay marked checked in that has no room.
		`UPDATE reservations SET status = 'checked_in' WHERE reservation_id = '` + id + `'`,
	} {
		if _, err := dbtest.SQL(env.DB).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	got := violations(t, env.DB, postgres.VerifyOptions{})
	for name, want := range map[string]int{"room_night_single_use": 1, "room_assignments_match_stays": 2,
		"stays_have_rooms": 1, "out_of_order_counted": 1} {
		if got[name] != want {
			t.Errorf("%s: %d violations, want %d (all: %v)", name, got[name], want, got)
		}
	}
}

// The waitlist checks find an offered entry whose hold is gone and an offer
// made past earlier waiters of the line.
func TestVerifyFindsPlantedWaitlistViolations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 1, 0, bookingtest.Date(1), bookingtest.Date(20))
	in, out := bookingtest.Date(3), bookingtest.Date(5)
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: env.Token("a", "guest"),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "a", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}})
	if r.Status != 201 {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	held := r.JSON()["reservation_id"].(string)
	var entries []string
	for _, g := range []string{"w0", "w1", "w2"} {
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/waitlist", Token: env.Token(g, "guest"),
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": g, "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out}})
		if r.Status != 201 {
			t.Fatalf("join: %d %s", r.Status, r.Body)
		}
		entries = append(entries, r.JSON()["entry_id"].(string))
	}
	if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + held + "/cancel",
		Token: env.Token("a", "guest"), IdemKey: bookingtest.NewKey()}); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	d3, err := reservation.ParseDate(in)
	if err != nil {
		t.Fatal(err)
	}
	offered, err := env.Store.OfferFreed(ctx, uuid.NewString(), waitlist.Free{HotelID: h.ID, RoomTypeID: h.RoomTypeID,
		Nights: []reservation.Date{d3, d3.AddDays(1)}})
	if err != nil || len(offered) != 1 || offered[0].ID != entries[0] {
		t.Fatalf("offer: %v %v", offered, err)
	}
	if v := violations(t, env.DB, postgres.VerifyOptions{}); len(v) != 0 {
		t.Fatalf("a consistent database has violations: %v", v)
	}
	for _, stmt := range []string{
		// The first waiter moved to the back of the line: offered past two.
		`UPDATE waitlist_entries SET seq = seq + 100 WHERE entry_id = '` + entries[0] + `'`,
		// Its offer's hold gone behind the application's back.
		`UPDATE reservations SET status = 'cancelled' WHERE reservation_id = '` + offered[0].Offer.ReservationID + `'`,
	} {
		if _, err := dbtest.SQL(env.DB).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	got := violations(t, env.DB, postgres.VerifyOptions{})
	for name, want := range map[string]int{"waitlist_fifo": 2, "waitlist_offer_holds": 1} {
		if got[name] != want {
			t.Errorf("%s: %d violations, want %d (all: %v)", name, got[name], want, got)
		}
	}
}
