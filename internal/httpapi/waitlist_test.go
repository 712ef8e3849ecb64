package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
)

// join puts guest on the hotel's waitlist for [in, out), with an e-mail
// address and a push token, and returns the answer.
func join(env *bookingtest.Env, h bookingtest.Hotel, guest, in, out string) bookingtest.Response {
	env.T.Helper()
	return env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/waitlist", Token: env.Token(guest, "guest"),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID,
			"check_in": in, "check_out": out, "contact_email": guest + "@example.com", "contact_push_token": "fcm:" + guest}})
}

// Guests join in order and see their places; leaving moves the line up;
// a guest sees only their own entries, an admin sees the line.
func TestWaitlistJoinPositionLeave(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 1, 0, bookingtest.Date(29), bookingtest.Date(40))
	in, out := bookingtest.Date(30), bookingtest.Date(32)
	var ids []string
	for i := range 3 {
		r := join(env, h, fmt.Sprintf("g%d", i), in, out)
		if r.Status != http.StatusCreated {
			t.Fatalf("join %d: %d %s", i, r.Status, r.Body)
		}
		m := r.JSON()
		if m["status"] != "waiting" || m["position"] != float64(i+1) {
			t.Fatalf("join %d: %s", i, r.Body)
		}
		ids = append(ids, m["entry_id"].(string))
	}
	// The same guest for the same stay again: refused, the line unchanged.
	if r := join(env, h, "g1", in, out); r.Status != http.StatusConflict || r.Code() != "invalid_state" {
		t.Fatalf("second join of one stay: %d %s", r.Status, r.Body)
	}
	// A replay answers as the first time.
	key := bookingtest.NewKey()
	body := map[string]any{"guest_id": "g9", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out}
	first := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/waitlist", Token: env.Token("g9", "guest"), IdemKey: key, Body: body})
	again := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/waitlist", Token: env.Token("g9", "guest"), IdemKey: key, Body: body})
	if first.Status != http.StatusCreated || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed join: %d %s / %d %s", first.Status, first.Body, again.Status, again.Body)
	}

	leave := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/waitlist/" + ids[0] + "/leave",
		Token: env.Token("g0", "guest"), IdemKey: bookingtest.NewKey()})
	if leave.Status != http.StatusOK || leave.JSON()["status"] != "left" || leave.JSON()["position"] != nil {
		t.Fatalf("leave: %d %s", leave.Status, leave.Body)
	}
	got := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/waitlist/" + ids[2], Token: env.Token("g2", "guest")})
	if got.Status != http.StatusOK || got.JSON()["position"] != float64(2) {
		t.Fatalf("position after a leave: %d %s", got.Status, got.Body)
	}
	if r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/waitlist/" + ids[2], Token: env.Token("g1", "guest")}); r.Status != http.StatusForbidden {
		t.Fatalf("another guest's entry: %d %s", r.Status, r.Body)
	}
	if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/waitlist/" + ids[1] + "/leave",
		Token: env.Token("g0", "guest"), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusForbidden {
		t.Fatalf("leaving for another guest: %d %s", r.Status, r.Body)
	}
	list := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/waitlist?room_type_id=" + h.RoomTypeID, Token: env.Admin()})
	entries, _ := list.JSON()["entries"].([]any)
	if list.Status != http.StatusOK || len(entries) != 4 {
		t.Fatalf("admin list: %d %s", list.Status, list.Body)
	}
	mine := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/waitlist?guest_id=g2", Token: env.Token("g2", "guest")})
	entries, _ = mine.JSON()["entries"].([]any)
	if mine.Status != http.StatusOK || len(entries) != 1 || entries[0].(map[string]any)["position"] != float64(2) {
		t.Fatalf("guest list: %d %s", mine.Status, mine.Body)
	}
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{"/v1/hotels/" + h.ID + "/waitlist", env.Token("g2", "guest"), http.StatusBadRequest},            // a guest without guest_id
		{"/v1/hotels/" + h.ID + "/waitlist?guest_id=g1", env.Token("g2", "guest"), http.StatusForbidden}, // another guest's
		{"/v1/hotels/" + h.ID + "/waitlist?status=gone", env.Admin(), http.StatusBadRequest},
		{"/v1/hotels/" + h.ID + "/waitlist?nope=1", env.Admin(), http.StatusBadRequest},
	} {
		if r := env.Do(bookingtest.Request{Method: "GET", Path: c.path, Token: c.token}); r.Status != c.status {
			t.Errorf("GET %s: %d %s, want %d", c.path, r.Status, r.Body, c.status)
		}
	}
}

// Bad joins are 4xx problems and change nothing.
func TestWaitlistJoinInput(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 1, 0, bookingtest.Date(29), bookingtest.Date(40))
	in, out := bookingtest.Date(30), bookingtest.Date(32)
	path := "/v1/hotels/" + h.ID + "/waitlist"
	for name, c := range map[string]struct {
		token, key string
		body       any
		status     int
		code       string
	}{
		"no key":         {env.Token("g", "guest"), "", map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out}, 400, "idempotency_key_required"},
		"no token":       {"", bookingtest.NewKey(), map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out}, 401, "unauthorized"},
		"another guest":  {env.Token("h", "guest"), bookingtest.NewKey(), map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out}, 403, "forbidden"},
		"bad dates":      {env.Token("g", "guest"), bookingtest.NewKey(), map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": out, "check_out": in}, 400, "invalid_request"},
		"two rooms":      {env.Token("g", "guest"), bookingtest.NewKey(), map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 2}, 400, "invalid_request"},
		"unknown field":  {env.Token("g", "guest"), bookingtest.NewKey(), map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "x": 1}, 400, "invalid_request"},
		"unknown type":   {env.Token("g", "guest"), bookingtest.NewKey(), map[string]any{"guest_id": "g", "room_type_id": "00000000-0000-4000-8000-000000000000", "check_in": in, "check_out": out}, 404, "not_found"},
		"a staff token":  {env.Token("s", "staff", h.ID), bookingtest.NewKey(), map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out}, 403, "forbidden"},
		"unknown hotel":  {env.Admin(), bookingtest.NewKey(), map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out}, 404, "not_found"},
		"no room type":   {env.Token("g", "guest"), bookingtest.NewKey(), map[string]any{"guest_id": "g", "check_in": in, "check_out": out}, 400, "invalid_request"},
		"control chars":  {env.Token("g", "guest"), bookingtest.NewKey(), map[string]any{"guest_id": "g\x00", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out}, 400, "invalid_request"},
		"malformed JSON": {env.Token("g", "guest"), bookingtest.NewKey(), "{", 400, "invalid_request"},
		"bad push token": {env.Token("g", "guest"), bookingtest.NewKey(), map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "contact_push_token": "a b"}, 400, "invalid_request"},
	} {
		p := path
		if name == "unknown hotel" {
			p = "/v1/hotels/00000000-0000-4000-8000-000000000001/waitlist"
		}
		r := env.Do(bookingtest.Request{Method: "POST", Path: p, Token: c.token, IdemKey: c.key, Body: c.body})
		if r.Status != c.status || r.Code() != c.code {
			t.Errorf("%s: %d %s, want %d %s", name, r.Status, r.Body, c.status, c.code)
		}
	}
	list := env.Do(bookingtest.Request{Method: "GET", Path: path, Token: env.Admin()})
	if entries, _ := list.JSON()["entries"].([]any); len(entries) != 0 {
		t.Fatalf("refused joins left entries: %s", list.Body)
	}
}
