package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/reservation"
)

// The life of a reservation: hold, read, confirm, cancel — with ownership
// checked on every step, the transitions the contract allows, and the
// nights returning to inventory.
func TestReservationLifecycle(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 3, 0, bookingtest.Date(1), bookingtest.Date(30))
	alice, bob, admin := env.Token("alice", "guest"), env.Token("bob", "guest"), env.Admin()
	path := "/v1/hotels/" + h.ID + "/reservations"
	in, out := bookingtest.Date(10), bookingtest.Date(13)
	r := env.Do(bookingtest.Request{Method: "POST", Path: path, Token: alice, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": "alice", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 2}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	res := r.JSON()
	for k, want := range map[string]any{"status": "held", "check_in": in, "check_out": out, "quantity": 2.0,
		"total_price_cents": 60000.0, "currency": "EUR", "guest_id": "alice", "hotel_id": h.ID} {
		if res[k] != want {
			t.Errorf("%s = %v, want %v", k, res[k], want)
		}
	}
	exp, err := time.Parse(time.RFC3339Nano, res["hold_expires_at"].(string))
	if err != nil || time.Until(exp) < 9*time.Minute || time.Until(exp) > 11*time.Minute {
		t.Errorf("hold_expires_at %v: want about 10 minutes ahead", res["hold_expires_at"])
	}
	id := res["reservation_id"].(string)
	// The hold answers what to pay: an intent for exactly the total.
	if p, _ := res["payment"].(map[string]any); p["amount_cents"] != 60000.0 || p["currency"] != "EUR" || p["intent_id"] == "" || p["client_secret"] == "" {
		t.Errorf("payment of the hold: %v", res["payment"])
	}
	ref := env.PayHold(r)
	avail := func() float64 {
		r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + in + "&check_out=" + out})
		if r.Status != 200 {
			t.Fatalf("availability: %d %s", r.Status, r.Body)
		}
		return r.JSON()["room_types"].([]any)[0].(map[string]any)["available"].(float64)
	}
	if a := avail(); a != 1 {
		t.Fatalf("available after holding 2 of 3 = %v", a)
	}
	if r := env.Do(bookingtest.Request{Method: "GET", Path: path + "/" + id, Token: bob}); r.Status != 403 || r.Code() != "forbidden" {
		t.Fatalf("bob reads alice's reservation: %d %s", r.Status, r.Body)
	}
	if r := env.Do(bookingtest.Request{Method: "GET", Path: path + "/" + id}); r.Status != 401 {
		t.Fatalf("anonymous read: %d", r.Status)
	}
	if r := env.Do(bookingtest.Request{Method: "POST", Path: path + "/" + id + "/confirm", Token: bob, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"payment_ref": ref}}); r.Status != 403 {
		t.Fatalf("bob confirms alice's reservation: %d %s", r.Status, r.Body)
	}
	confirm := env.Do(bookingtest.Request{Method: "POST", Path: path + "/" + id + "/confirm", Token: alice, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"payment_ref": ref}})
	if confirm.Status != 200 || confirm.JSON()["status"] != "confirmed" || confirm.JSON()["payment_ref"] != ref {
		t.Fatalf("confirm: %d %s", confirm.Status, confirm.Body)
	}
	if r := env.Do(bookingtest.Request{Method: "GET", Path: path + "/" + id, Token: admin}); r.JSON()["status"] != "confirmed" {
		t.Fatalf("read after confirm: %s", r.Body)
	}
	cancel := env.Do(bookingtest.Request{Method: "POST", Path: path + "/" + id + "/cancel", Token: alice, IdemKey: bookingtest.NewKey()})
	if cancel.Status != 200 || cancel.JSON()["status"] != "cancelled" {
		t.Fatalf("cancel: %d %s", cancel.Status, cancel.Body)
	}
	if a := avail(); a != 3 {
		t.Fatalf("available after cancel = %v, want 3", a)
	}
	for _, op := range []string{"confirm", "cancel"} {
		r := env.Do(bookingtest.Request{Method: "POST", Path: path + "/" + id + "/" + op, Token: alice, IdemKey: bookingtest.NewKey(),
			Body: map[string]any{"payment_ref": "p2"}})
		if op == "cancel" {
			r = env.Do(bookingtest.Request{Method: "POST", Path: path + "/" + id + "/" + op, Token: alice, IdemKey: bookingtest.NewKey()})
		}
		if r.Status != 409 || r.Code() != "invalid_state" {
			t.Errorf("%s a cancelled reservation: %d %s", op, r.Status, r.Body)
		}
	}
	var events []string
	rows, err := dbtest.SQL(env.DB).Query(context.Background(),
		`SELECT event_type FROM outbox WHERE aggregate_id = $1 ORDER BY aggregate_version`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e string
		_ = rows.Scan(&e)
		events = append(events, e)
	}
	rows.Close()
	want := []string{reservation.EventHeld, reservation.EventConfirmed, reservation.EventCancelled}
	if len(events) != len(want) {
		t.Fatalf("outbox events %v, want %v", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("outbox events %v, want %v", events, want)
		}
	}
	env.AssertInventory()
}

// Overbooking folds into each night's limit; lowering a night below what is
// already reserved is refused and changes nothing; room types with a default
// room count get a year of nights loaded.
func TestInventoryRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	admin := env.Admin()
	h := env.SeedHotel("", 10, 20, bookingtest.Date(1), bookingtest.Date(5))
	var limit int
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT max(sell_limit) FROM room_inventory WHERE hotel_id = $1`, h.ID).Scan(&limit); err != nil {
		t.Fatal(err)
	}
	if limit != 12 {
		t.Fatalf("sell limit of 10 rooms at 20%% overbooking = %d, want 12", limit)
	}
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(2), "check_out": bookingtest.Date(4), "quantity": 12}})
	if r.Status != 201 {
		t.Fatalf("holding the overbooked 12: %d %s", r.Status, r.Body)
	}
	invPath := "/v1/hotels/" + h.ID + "/room-types/" + h.RoomTypeID + "/inventory"
	r = env.Do(bookingtest.Request{Method: "PUT", Path: invPath, Token: admin,
		Body: map[string]any{"from": bookingtest.Date(1), "to": bookingtest.Date(5), "total_rooms": 8}})
	if r.Status != 409 || r.Code() != "invalid_state" {
		t.Fatalf("lowering below reserved: %d %s", r.Status, r.Body)
	}
	if nights, _ := r.JSON()["nights"].([]any); len(nights) != 2 {
		t.Errorf("refusal names nights %v, want the 2 reserved ones", r.JSON()["nights"])
	}
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT min(total_rooms) FROM room_inventory WHERE hotel_id = $1`, h.ID).Scan(&limit); err != nil || limit != 10 {
		t.Fatalf("a refused update changed total_rooms to %d (%v)", limit, err)
	}
	// 10 rooms at 20% = 12 covers the 12 reserved: allowed.
	r = env.Do(bookingtest.Request{Method: "PUT", Path: invPath, Token: admin,
		Body: map[string]any{"from": bookingtest.Date(1), "to": bookingtest.Date(5), "total_rooms": 10}})
	if r.Status != 200 || r.JSON()["nights"].(float64) != 4 {
		t.Fatalf("re-setting inventory: %d %s", r.Status, r.Body)
	}
	// A room type with a default room count gets the sale window loaded.
	r = env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/room-types", Token: admin,
		Body: map[string]any{"name": "Loft", "max_guests": 4, "price_cents": 50000, "currency": "EUR", "overbooking_pct": 0, "default_total_rooms": 2}})
	if r.Status != 201 {
		t.Fatalf("room type with default: %d %s", r.Status, r.Body)
	}
	loft := r.JSON()["room_type_id"].(string)
	var nights int
	_ = dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM room_inventory WHERE room_type_id = $1`, loft).Scan(&nights)
	if nights != reservation.SaleWindowDays {
		t.Fatalf("default room count loaded %d nights, want %d", nights, reservation.SaleWindowDays)
	}
	// The rolling job adds tomorrow's new night and leaves the rest alone.
	added, err := env.Store.LoadDefaultNights(ctx, reservation.DateOf(time.Now().UTC()).AddDays(1))
	if err != nil || added != 1 {
		t.Fatalf("rolling job added %d nights (%v), want 1", added, err)
	}
	env.AssertInventory()
}
