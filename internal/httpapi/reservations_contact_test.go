package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
)

// A hotel stay carries the contact data its notifications need, push
// included: the device token given at hold time is kept on the
// reservation, shown back, and in its events (the read model and the
// notifier take it from there); a malformed token or address is refused
// with a problem and writes nothing.
func TestReservationContactFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(20))
	guest := env.Token("ann", berth.RoleGuest)
	hold := func(extra map[string]any) bookingtest.Response {
		body := map[string]any{"guest_id": "ann", "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(3), "check_out": bookingtest.Date(5), "quantity": 1}
		for k, v := range extra {
			body[k] = v
		}
		return env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: guest,
			IdemKey: bookingtest.NewKey(), Body: body})
	}
	for _, bad := range []map[string]any{
		{"contact_email": "bad"},
		{"contact_push_token": "has space"},
		{"contact_push_token": "semi;colon"},
		{"contact_push_token": "ünicode"},
		{"contact_push_token": strings.Repeat("a", 1025)},
	} {
		r := hold(bad)
		if r.Status != http.StatusBadRequest || r.Code() != "invalid_request" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
			t.Fatalf("hold with %.40v: %d %s", bad, r.Status, r.Body)
		}
	}
	var n int
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM reservations WHERE hotel_id = $1`, h.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d reservations after refused holds (%v), want 0", n, err)
	}

	const pushToken = "fcm:APA91bH-x_y.z0123456789"
	r := hold(map[string]any{"contact_email": "ann@example.test", "contact_phone": "+49 30 1234567", "contact_push_token": pushToken})
	if r.Status != http.StatusCreated || r.JSON()["contact_push_token"] != pushToken {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["reservation_id"].(string)
	confirm := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/confirm", Token: env.Admin(),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "pay-ann"}})
	if confirm.Status != http.StatusOK || confirm.JSON()["contact_push_token"] != pushToken {
		t.Fatalf("confirm: %d %s", confirm.Status, confirm.Body)
	}
	got := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/reservations/" + id, Token: guest})
	if got.JSON()["contact_email"] != "ann@example.test" || got.JSON()["contact_phone"] != "+49 30 1234567" ||
		got.JSON()["contact_push_token"] != pushToken {
		t.Fatalf("reservation without its contact: %s", got.Body)
	}
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM outbox WHERE aggregate_id = $1
		AND event_type IN ('reservation.held', 'reservation.confirmed') AND payload->>'contact_push_token' = $2`, id, pushToken).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d held/confirmed events with the push token (%v), want 2", n, err)
	}
	// Without a token the field is absent, as before it existed.
	r = hold(nil)
	if _, ok := r.JSON()["contact_push_token"]; r.Status != http.StatusCreated || ok {
		t.Fatalf("hold without a token: %d %s", r.Status, r.Body)
	}
}
