package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// roomType adds a room type with total rooms on [from, to) to a hotel, and
// n physical rooms of it; it returns the type's id.
func roomType(t *testing.T, env *bookingtest.Env, hotelID, name string, maxGuests, price, total, rooms int, prefix string) string {
	t.Helper()
	admin := env.Admin()
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + hotelID + "/room-types", Token: admin, Body: map[string]any{
		"name": name, "max_guests": maxGuests, "price_cents": price, "currency": "EUR", "overbooking_pct": 0}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create room type: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["room_type_id"].(string)
	r = env.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + hotelID + "/room-types/" + id + "/inventory", Token: admin,
		Body: map[string]any{"from": bookingtest.Date(-1), "to": bookingtest.Date(10), "total_rooms": total}})
	if r.Status != http.StatusOK {
		t.Fatalf("set inventory: %d %s", r.Status, r.Body)
	}
	if rooms > 0 {
		env.SeedRooms(bookingtest.Hotel{ID: hotelID, RoomTypeID: id}, prefix, rooms)
	}
	return id
}

// hotelIn creates a hotel of chain (none when "") in city, as admin.
func hotelIn(t *testing.T, env *bookingtest.Env, city, chain string) string {
	t.Helper()
	body := map[string]any{"name": "Sister " + city, "city": city, "country": "DE", "timezone": "Europe/Berlin", "home_region": env.Store.Region()}
	if chain != "" {
		body["chain"] = chain
	}
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels", Token: env.Admin(), Body: body})
	if r.Status != http.StatusCreated || r.JSON()["chain"] != anyOrNil(chain) {
		t.Fatalf("create hotel: %d %s", r.Status, r.Body)
	}
	return r.JSON()["hotel_id"].(string)
}

func anyOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func optionIDs(r bookingtest.Response, kind, field string) []string {
	opts, _ := r.JSON()["options"].(map[string]any)
	var out []string
	list, _ := opts[kind].([]any)
	for _, o := range list {
		out = append(out, o.(map[string]any)[field].(string))
	}
	return out
}

func getReservation(env *bookingtest.Env, hotelID, id string) map[string]any {
	return env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + hotelID + "/reservations/" + id, Token: env.Admin()}).JSON()
}

// A check-in morning with more guests than rooms: the first guest gets the
// last room; the next hears 409 no_room_free with the options — an upgrade
// to the suite, a relocation to the sister hotel of the chain in the same
// city (not the one of another city, not the one outside the chain) — and
// is upgraded free of charge; the third is relocated through the saga and
// ends walked, with the sister hotel's stay linked to it and the
// compensation on the event; a relocation the sister cannot take is undone.
func TestWalksAtTheDesk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 4, 0, bookingtest.Date(-1), bookingtest.Date(10))
	env.SeedRooms(h, "1", 1)
	if r := env.Do(bookingtest.Request{Method: "PATCH", Path: "/v1/hotels/" + h.ID, Token: env.Admin(),
		Body: map[string]any{"chain": "Acme"}}); r.Status != http.StatusOK || r.JSON()["chain"] != "Acme" {
		t.Fatalf("set chain: %d %s", r.Status, r.Body)
	}
	suite := roomType(t, env, h.ID, "Suite", 3, 30000, 1, 1, "9")
	sister := hotelIn(t, env, "MÚNICH", "Acme")
	sisterType := roomType(t, env, sister, "Double", 2, 12000, 5, 0, "")
	elsewhere := hotelIn(t, env, "Berlin", "Acme")
	roomType(t, env, elsewhere, "Double", 2, 12000, 5, 0, "")
	outside := hotelIn(t, env, "Múnich", "")
	roomType(t, env, outside, "Double", 2, 12000, 5, 0, "")

	first := confirmedStay(t, env, h, "ann", 0, 2, 1)
	second := confirmedStay(t, env, h, "bob", 0, 2, 1)
	third := confirmedStay(t, env, h, "cy", 0, 2, 1)
	fourth := confirmedStay(t, env, h, "dee", 0, 2, 1)
	if r := desk(env, h, first, "check-in", nil); r.Status != http.StatusOK {
		t.Fatalf("check-in: %d %s", r.Status, r.Body)
	}
	r := desk(env, h, second, "check-in", nil)
	if r.Status != http.StatusConflict || r.Code() != "no_room_free" {
		t.Fatalf("check-in without a room: %d %s", r.Status, r.Body)
	}
	if got := optionIDs(r, "upgrades", "room_type_id"); len(got) != 1 || got[0] != suite {
		t.Fatalf("upgrade options = %v, want the suite: %s", got, r.Body)
	}
	if got := optionIDs(r, "relocations", "hotel_id"); len(got) != 1 || got[0] != sister {
		t.Fatalf("relocation options = %v, want only the sister hotel in the same city: %s", got, r.Body)
	}

	// Refusals change nothing.
	for _, c := range []struct {
		action string
		body   any
		status int
		code   string
	}{
		{"upgrade", map[string]any{"room_type_id": h.RoomTypeID}, 409, "invalid_state"},
		{"upgrade", map[string]any{"room_type_id": sisterType}, 404, "not_found"},
		{"upgrade", map[string]any{}, 400, "invalid_request"},
		{"upgrade", map[string]any{"room_type_id": suite, "extra": 1}, 400, "invalid_request"},
		{"relocate", map[string]any{"hotel_id": elsewhere}, 409, "invalid_state"},
		{"relocate", map[string]any{"hotel_id": outside}, 409, "invalid_state"},
		{"relocate", map[string]any{"hotel_id": h.ID}, 409, "invalid_state"},
		{"relocate", map[string]any{"hotel_id": "nope"}, 400, "invalid_request"},
		{"relocate", map[string]any{"hotel_id": sister, "room_type_id": suite}, 404, "not_found"},
	} {
		if r := desk(env, h, second, c.action, c.body); r.Status != c.status || r.Code() != c.code {
			t.Fatalf("%s %v: %d %s, want %d %s", c.action, c.body, r.Status, r.Body, c.status, c.code)
		}
	}
	if got := getReservation(env, h.ID, second); got["status"] != "confirmed" || got["version"].(float64) != 2 {
		t.Fatalf("after refusals: %v", got)
	}

	// Bob is upgraded to the suite: checked in, no extra charge, the
	// double's nights come back and the suite's are taken.
	r = desk(env, h, second, "upgrade", map[string]any{"room_type_id": suite})
	if r.Status != http.StatusOK || r.JSON()["status"] != "checked_in" || r.JSON()["room_type_id"] != suite ||
		r.JSON()["upgraded_from"] != h.RoomTypeID || r.JSON()["total_price_cents"].(float64) != 20000 {
		t.Fatalf("upgrade: %d %s", r.Status, r.Body)
	}
	if rooms := r.JSON()["rooms"].([]any); len(rooms) != 1 || rooms[0].(map[string]any)["number"] != "901" {
		t.Fatalf("upgrade rooms: %s", r.Body)
	}

	// Cy: no room, no upgrade left; relocated to the sister hotel.
	r = desk(env, h, third, "check-in", nil)
	if r.Status != http.StatusConflict || len(optionIDs(r, "upgrades", "room_type_id")) != 0 || len(optionIDs(r, "relocations", "hotel_id")) != 1 {
		t.Fatalf("check-in of the third: %d %s", r.Status, r.Body)
	}
	// Cy's app registered for push (the hold's contact_push_token): the
	// token follows cy to the new stay, as the e-mail and phone do.
	const cyToken = "fcm:cy-device_1"
	if _, err := dbtest.SQL(env.DB).Exec(ctx, `UPDATE reservations SET contact_push_token = $2 WHERE reservation_id = $1`, third, cyToken); err != nil {
		t.Fatal(err)
	}
	r = desk(env, h, third, "relocate", map[string]any{"hotel_id": sister})
	walk, _ := r.JSON()["walk"].(map[string]any)
	if r.Status != http.StatusAccepted || r.JSON()["status"] != "walking" || walk["hotel_id"] != sister {
		t.Fatalf("relocate: %d %s", r.Status, r.Body)
	}
	walkID := walk["reservation_id"].(string)
	if r := desk(env, h, third, "cancel", nil); r.Status != http.StatusConflict {
		t.Fatalf("cancel while walking: %d %s", r.Status, r.Body)
	}
	if n, err := bookingtest.PumpWalks(ctx, env.DB, env.Store); err != nil || n != 2 {
		t.Fatalf("saga: %d events, %v; want the request and the answer", n, err)
	}
	got := getReservation(env, h.ID, third)
	if got["status"] != "walked" {
		t.Fatalf("original after the saga: %v", got)
	}
	moved := getReservation(env, sister, walkID)
	from, _ := moved["relocated_from"].(map[string]any)
	if moved["status"] != "confirmed" || moved["guest_id"] != "cy" || from["reservation_id"] != third || moved["room_type_id"] != sisterType ||
		moved["contact_push_token"] != cyToken {
		t.Fatalf("relocated stay: %v", moved)
	}
	var amount int64
	var payee string
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT (payload->'compensation'->>'amount_cents')::INT8, payload->'compensation'->>'payee_hotel_id'
		FROM outbox WHERE aggregate_id = $1 AND event_type = 'reservation.walked'`, third).Scan(&amount, &payee); err != nil ||
		amount != 24000 || payee != sister {
		t.Fatalf("walked event compensation = %d to %s, %v; want 2 nights × 12000 to the sister", amount, payee, err)
	}
	// booking verify's event check takes reservation.relocated for the
	// relocated stay's confirmation (it is never confirmed otherwise).
	if v, err := bookingtest.Violations(ctx, env.DB, []string{h.ID, sister}, postgres.CheckReservationEvent); err != nil || len(v) != 0 {
		t.Fatalf("verify after the relocation: %v, %v", v, err)
	}

	// Dee: the sister hotel is full now (the relocation asked for a type it
	// lacks rooms of), so the walk is undone and dee is confirmed again.
	if _, err := dbtest.SQL(env.DB).Exec(ctx, `UPDATE room_inventory SET sell_limit = reserved WHERE hotel_id = $1`, sister); err != nil {
		t.Fatal(err)
	}
	r = desk(env, h, fourth, "relocate", map[string]any{"hotel_id": sister})
	if r.Status != http.StatusAccepted {
		t.Fatalf("relocate dee: %d %s", r.Status, r.Body)
	}
	if _, err := bookingtest.PumpWalks(ctx, env.DB, env.Store); err != nil {
		t.Fatal(err)
	}
	if got := getReservation(env, h.ID, fourth); got["status"] != "confirmed" || got["walk"] != nil {
		t.Fatalf("undone walk: %v", got)
	}
	var undone int
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND event_type = 'reservation.walk_undone'`,
		fourth).Scan(&undone); err != nil || undone != 1 {
		t.Fatalf("walk_undone events = %d, %v", undone, err)
	}
	// The walk's options read, for the desk, what a refused check-in says.
	r = env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/reservations/" + fourth + "/walk-options", Token: env.Admin()})
	if r.Status != http.StatusOK || len(optionIDs(r, "relocations", "hotel_id")) != 0 {
		t.Fatalf("walk options: %d %s", r.Status, r.Body)
	}
	env.AssertInventory()
}

// 50 confirmed guests arrive at once for the last two rooms of their type
// while three suites are free; each desk tries a check-in and, refused, an
// upgrade. Two check in, three are upgraded, 45 hear no_room_free — and the
// database shows no room given twice on any night and the inventory of
// both types matching the stays.
func TestUpgradeRaceForLastRooms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 60, 0, bookingtest.Date(-1), bookingtest.Date(10))
	env.SeedRooms(h, "1", 2)
	suite := roomType(t, env, h.ID, "Suite", 3, 30000, 3, 3, "9")
	const guests = 50
	ids := make([]string, guests)
	for i := range ids {
		ids[i] = confirmedStay(t, env, h, fmt.Sprintf("g%d", i), 0, 3, 1)
	}
	outcome := make([]string, guests)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			path := "/v1/hotels/" + h.ID + "/reservations/" + id
			r, err := env.Try(ctx, bookingtest.Request{Method: "POST", Path: path + "/check-in", Token: env.Admin(), IdemKey: bookingtest.NewKey()})
			if err != nil {
				outcome[i] = err.Error()
				return
			}
			if r.Status == http.StatusOK {
				outcome[i] = "checked in"
				return
			}
			r, err = env.Try(ctx, bookingtest.Request{Method: "POST", Path: path + "/upgrade", Token: env.Admin(), IdemKey: bookingtest.NewKey(),
				Body: map[string]any{"room_type_id": suite}})
			if err != nil {
				outcome[i] = err.Error()
				return
			}
			outcome[i] = fmt.Sprintf("upgrade %d %s", r.Status, r.Code())
		}()
	}
	close(start)
	wg.Wait()
	count := map[string]int{}
	for _, o := range outcome {
		count[o]++
	}
	if count["checked in"] != 2 || count["upgrade 200 "] != 3 || count["upgrade 409 no_room_free"] != guests-5 {
		t.Fatalf("outcomes = %v, want 2 checked in, 3 upgraded, %d refused", count, guests-5)
	}
	var dup, suiteReserved, doubleReserved, upgraded int
	err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT
		(SELECT count(*) FROM (SELECT 1 FROM room_nights WHERE hotel_id = $1 GROUP BY room_id, night HAVING count(*) > 1) d),
		(SELECT max(reserved) FROM room_inventory WHERE hotel_id = $1 AND room_type_id = $2 AND night = $4),
		(SELECT max(reserved) FROM room_inventory WHERE hotel_id = $1 AND room_type_id = $3 AND night = $4),
		(SELECT count(*) FROM reservations WHERE hotel_id = $1 AND upgraded_from = $3 AND status = 'checked_in')`,
		h.ID, suite, h.RoomTypeID, bookingtest.Date(1)).Scan(&dup, &suiteReserved, &doubleReserved, &upgraded)
	if err != nil {
		t.Fatal(err)
	}
	if dup != 0 || suiteReserved != 3 || doubleReserved != guests-3 || upgraded != 3 {
		t.Fatalf("database: %d room-nights used twice, suite reserved %d, double %d, upgraded %d; want 0, 3, %d, 3",
			dup, suiteReserved, doubleReserved, upgraded, guests-3)
	}
	env.AssertInventory()
}
