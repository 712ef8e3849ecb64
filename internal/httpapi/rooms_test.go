package httpapi_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
)

// availableOn reads what is left of the seeded room type on each night.
func availableOn(t *testing.T, env *bookingtest.Env, h bookingtest.Hotel, in, out int) []int {
	t.Helper()
	r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/availability?check_in=" +
		bookingtest.Date(in) + "&check_out=" + bookingtest.Date(out)})
	if r.Status != http.StatusOK {
		t.Fatalf("availability: %d %s", r.Status, r.Body)
	}
	var got []int
	for _, n := range r.JSON()["room_types"].([]any)[0].(map[string]any)["nights"].([]any) {
		got = append(got, int(n.(map[string]any)["available"].(float64)))
	}
	return got
}

func nightsOf(r bookingtest.Response) []string {
	var out []string
	for _, n := range r.JSON()["nights"].([]any) {
		out = append(out, n.(string))
	}
	return out
}

// Rooms out of order take sellable rooms away night by night, never below
// what is already reserved; putting them back returns the rooms.
func TestRoomsOutOfOrder(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	admin := env.Admin()
	h := env.SeedHotel("", 3, 0, bookingtest.Date(1), bookingtest.Date(20))
	rooms := env.SeedRooms(h, "1", 2)
	base := "/v1/hotels/" + h.ID + "/rooms"

	// The catalog refuses what it cannot keep.
	for _, tc := range []struct {
		body       map[string]any
		status     int
		code       string
		name, path string
	}{
		{map[string]any{"room_type_id": h.RoomTypeID, "number": "101", "floor": 1}, 409, "invalid_state", "number taken", base},
		{map[string]any{"room_type_id": "00000000-0000-0000-0000-000000000000", "number": "999", "floor": 1}, 404, "not_found", "unknown type", base},
		{map[string]any{"room_type_id": h.RoomTypeID, "number": "", "floor": 1}, 400, "invalid_request", "no number", base},
		{map[string]any{"room_type_id": h.RoomTypeID, "number": "7", "floor": 900}, 400, "invalid_request", "floor", base},
		{map[string]any{"room_type_id": h.RoomTypeID, "number": "7"}, 400, "invalid_request", "no floor", base},
		{map[string]any{"from": bookingtest.Date(5), "to": bookingtest.Date(5), "reason": "x"}, 400, "invalid_request", "empty range", base + "/" + rooms[0] + "/out-of-order"},
		{map[string]any{"from": bookingtest.Date(5), "to": bookingtest.Date(6)}, 400, "invalid_request", "no reason", base + "/" + rooms[0] + "/out-of-order"},
		{map[string]any{"from": bookingtest.Date(5), "to": bookingtest.Date(6), "reason": "x"}, 404, "not_found", "unknown room", base + "/00000000-0000-0000-0000-000000000000/out-of-order"},
	} {
		r := env.Do(bookingtest.Request{Method: "POST", Path: tc.path, Token: admin, Body: tc.body})
		if r.Status != tc.status || r.Code() != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.code)
		}
	}

	// Two of three rooms reserved on nights 5 and 6.
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(5), "check_out": bookingtest.Date(7), "quantity": 2}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	ooo := func(room string, from, to int) bookingtest.Response {
		return env.Do(bookingtest.Request{Method: "POST", Path: base + "/" + room + "/out-of-order", Token: admin,
			Body: map[string]any{"from": bookingtest.Date(from), "to": bookingtest.Date(to), "reason": "leaking pipe"}})
	}
	// One room out of order on 5–7 still leaves the two reserved rooms.
	if r := ooo(rooms[0], 5, 8); r.Status != http.StatusOK {
		t.Fatalf("out of order: %d %s", r.Status, r.Body)
	}
	if got := availableOn(t, env, h, 4, 9); !slices.Equal(got, []int{3, 0, 0, 2, 3}) {
		t.Fatalf("available 4..8 = %v, want [3 0 0 2 3]", got)
	}
	// A second one on 6–8 would leave one room for two reserved on night 6.
	r = ooo(rooms[1], 6, 9)
	if r.Status != http.StatusConflict || r.Code() != "invalid_state" || !slices.Equal(nightsOf(r), []string{bookingtest.Date(6)}) {
		t.Fatalf("second room out of order: %d %s, want 409 invalid_state naming night 6", r.Status, r.Body)
	}
	if got := availableOn(t, env, h, 4, 9); !slices.Equal(got, []int{3, 0, 0, 2, 3}) {
		t.Fatalf("a refused request changed availability: %v", got)
	}
	// Nights not loaded cannot carry the count.
	r = ooo(rooms[1], 19, 22)
	if r.Status != http.StatusConflict || !slices.Equal(nightsOf(r), []string{bookingtest.Date(20), bookingtest.Date(21)}) {
		t.Fatalf("out of order on unloaded nights: %d %s", r.Status, r.Body)
	}
	// Raising the inventory keeps the room out of order: 4 rooms, 1 out.
	r = env.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + h.ID + "/room-types/" + h.RoomTypeID + "/inventory", Token: admin,
		Body: map[string]any{"from": bookingtest.Date(1), "to": bookingtest.Date(20), "total_rooms": 4}})
	if r.Status != http.StatusOK {
		t.Fatalf("raise inventory: %d %s", r.Status, r.Body)
	}
	if got := availableOn(t, env, h, 4, 9); !slices.Equal(got, []int{4, 1, 1, 3, 4}) {
		t.Fatalf("available after raising = %v, want [4 1 1 3 4]", got)
	}
	// Lowering to 2 would leave 1 sellable room for the 2 reserved.
	r = env.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + h.ID + "/room-types/" + h.RoomTypeID + "/inventory", Token: admin,
		Body: map[string]any{"from": bookingtest.Date(1), "to": bookingtest.Date(20), "total_rooms": 2}})
	if r.Status != http.StatusConflict || !slices.Equal(nightsOf(r), []string{bookingtest.Date(5), bookingtest.Date(6)}) {
		t.Fatalf("lower inventory under out-of-order: %d %s", r.Status, r.Body)
	}
	// The list shows the period; back in order returns the rooms.
	r = env.Do(bookingtest.Request{Method: "GET", Path: base, Token: admin})
	list := r.JSON()["rooms"].([]any)
	if r.Status != http.StatusOK || len(list) != 2 {
		t.Fatalf("list rooms: %d %s", r.Status, r.Body)
	}
	periods := list[0].(map[string]any)["out_of_order"].([]any)
	if len(periods) != 1 || periods[0].(map[string]any)["from"] != bookingtest.Date(5) || periods[0].(map[string]any)["to"] != bookingtest.Date(8) {
		t.Fatalf("out-of-order periods = %v", periods)
	}
	r = env.Do(bookingtest.Request{Method: "DELETE", Path: base + "/" + rooms[0] + "/out-of-order?from=" + bookingtest.Date(6) + "&to=" + bookingtest.Date(10), Token: admin})
	if r.Status != http.StatusOK || len(r.JSON()["out_of_order"].([]any)) != 1 {
		t.Fatalf("back in order: %d %s", r.Status, r.Body)
	}
	if got := availableOn(t, env, h, 4, 9); !slices.Equal(got, []int{4, 1, 2, 4, 4}) {
		t.Fatalf("available after back in order = %v, want [4 1 2 4 4]", got)
	}
	env.AssertInventory()
}
