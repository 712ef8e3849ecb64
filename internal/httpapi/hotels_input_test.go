package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
)

// Malformed requests get a clear 4xx problem+json with a code from the API
// contract, and change nothing.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(60))
	guest := env.Token("guest-1", "guest")
	other := env.Token("guest-2", "guest")
	admin := env.Admin()
	valid := func(over map[string]any) map[string]any {
		b := map[string]any{"guest_id": "guest-1", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(10), "check_out": bookingtest.Date(12), "quantity": 1}
		for k, v := range over {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	holdPath := "/v1/hotels/" + h.ID + "/reservations"
	huge := `{"guest_id":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		name     string
		req      bookingtest.Request
		status   int
		code     string
		noIdem   bool
		rawToken bool
	}{
		{"non-JSON body", bookingtest.Request{Body: "guest=1&quantity=2"}, 400, "invalid_request", false, false},
		{"form content type", bookingtest.Request{Body: valid(nil), ContentType: "application/x-www-form-urlencoded"}, 400, "invalid_request", false, false},
		{"JSON array", bookingtest.Request{Body: `[1,2]`}, 400, "invalid_request", false, false},
		{"truncated JSON", bookingtest.Request{Body: `{"guest_id":"guest-1",`}, 400, "invalid_request", false, false},
		{"trailing data", bookingtest.Request{Body: `{"guest_id":"guest-1"} {}`}, 400, "invalid_request", false, false},
		{"unknown field", bookingtest.Request{Body: valid(map[string]any{"rooms": 1})}, 400, "invalid_request", false, false},
		{"missing guest_id", bookingtest.Request{Body: valid(map[string]any{"guest_id": nil})}, 400, "invalid_request", false, false},
		{"quantity zero", bookingtest.Request{Body: valid(map[string]any{"quantity": 0})}, 400, "invalid_request", false, false},
		{"quantity negative", bookingtest.Request{Body: valid(map[string]any{"quantity": -1})}, 400, "invalid_request", false, false},
		{"quantity huge", bookingtest.Request{Body: valid(map[string]any{"quantity": 1e12})}, 400, "invalid_request", false, false},
		{"quantity overflow", bookingtest.Request{Body: strings.Replace(mustJSON(valid(nil)), `"quantity":1`, `"quantity":99999999999999999999999`, 1)}, 400, "invalid_request", false, false},
		{"quantity as string", bookingtest.Request{Body: valid(map[string]any{"quantity": "2"})}, 400, "invalid_request", false, false},
		{"quantity fractional", bookingtest.Request{Body: valid(map[string]any{"quantity": 1.5})}, 400, "invalid_request", false, false},
		{"guest_id as number", bookingtest.Request{Body: valid(map[string]any{"guest_id": 7})}, 400, "invalid_request", false, false},
		{"bad date format", bookingtest.Request{Body: valid(map[string]any{"check_in": "10/12/2027"})}, 400, "invalid_request", false, false},
		{"impossible date", bookingtest.Request{Body: valid(map[string]any{"check_in": "2027-02-30"})}, 400, "invalid_request", false, false},
		{"check_out equals check_in", bookingtest.Request{Body: valid(map[string]any{"check_out": bookingtest.Date(10)})}, 400, "invalid_request", false, false},
		{"check_out before check_in", bookingtest.Request{Body: valid(map[string]any{"check_out": bookingtest.Date(8)})}, 400, "invalid_request", false, false},
		{"check_in in the past", bookingtest.Request{Body: valid(map[string]any{"check_in": bookingtest.Date(-10)})}, 400, "invalid_request", false, false},
		{"stay too long", bookingtest.Request{Body: valid(map[string]any{"check_out": bookingtest.Date(50)})}, 400, "invalid_request", false, false},
		{"beyond sale window", bookingtest.Request{Body: valid(map[string]any{"check_in": bookingtest.Date(400), "check_out": bookingtest.Date(401)})}, 400, "invalid_request", false, false},
		{"2 MB body", bookingtest.Request{Body: huge}, 400, "invalid_request", false, false},
		{"unknown room type", bookingtest.Request{Body: valid(map[string]any{"room_type_id": "7d3c8f5e-0000-4000-8000-000000000000"})}, 404, "not_found", false, false},
		{"room type not a uuid", bookingtest.Request{Body: valid(map[string]any{"room_type_id": "'; DROP TABLE reservations; --"})}, 404, "not_found", false, false},
		{"unknown hotel", bookingtest.Request{Path: "/v1/hotels/7d3c8f5e-0000-4000-8000-000000000000/reservations", Body: valid(nil)}, 404, "not_found", false, false},
		{"hotel id not a uuid", bookingtest.Request{Path: "/v1/hotels/not-a-hotel/reservations", Body: valid(nil)}, 404, "not_found", false, false},
		{"no idempotency key", bookingtest.Request{Body: valid(nil)}, 400, "idempotency_key_required", true, false},
		{"idempotency key too long", bookingtest.Request{Body: valid(nil), IdemKey: strings.Repeat("k", 65)}, 400, "invalid_request", false, false},
		{"no token", bookingtest.Request{Body: valid(nil), Token: "-"}, 401, "unauthorized", false, true},
		{"garbage token", bookingtest.Request{Body: valid(nil), Token: "abc.def.ghi"}, 401, "unauthorized", false, true},
		{"another guest's id", bookingtest.Request{Body: valid(nil), Token: other}, 403, "forbidden", false, true},
	}
	before := inventorySnapshot(t, env, h.ID)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Method = "POST"
			if req.Path == "" {
				req.Path = holdPath
			}
			if !tc.rawToken {
				req.Token = guest
			} else if req.Token == "-" {
				req.Token = ""
			}
			if req.IdemKey == "" && !tc.noIdem {
				req.IdemKey = bookingtest.NewKey()
			}
			r := env.Do(req)
			if r.Status != tc.status || r.Code() != tc.code {
				t.Fatalf("got %d %q (%s), want %d %q", r.Status, r.Code(), truncate(r.Body), tc.status, tc.code)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type %q, want application/problem+json", ct)
			}
			doc := r.JSON()
			for _, k := range []string{"type", "title", "status", "detail", "code"} {
				if _, ok := doc[k]; !ok {
					t.Errorf("problem lacks %q: %s", k, r.Body)
				}
			}
		})
	}
	// Catalog and read routes refuse bad input the same way.
	for _, tc := range []struct {
		name   string
		req    bookingtest.Request
		status int
		code   string
	}{
		{"availability without dates", bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/availability"}, 400, "invalid_request"},
		{"availability reversed", bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + bookingtest.Date(5) + "&check_out=" + bookingtest.Date(3)}, 400, "invalid_request"},
		{"availability unknown param", bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + bookingtest.Date(5) + "&check_out=" + bookingtest.Date(6) + "&x=1"}, 400, "invalid_request"},
		{"inventory as guest", bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + h.ID + "/room-types/" + h.RoomTypeID + "/inventory", Token: guest,
			Body: map[string]any{"from": bookingtest.Date(1), "to": bookingtest.Date(2), "total_rooms": 1}}, 403, "forbidden"},
		{"inventory negative", bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + h.ID + "/room-types/" + h.RoomTypeID + "/inventory", Token: admin,
			Body: map[string]any{"from": bookingtest.Date(1), "to": bookingtest.Date(2), "total_rooms": -1}}, 400, "invalid_request"},
		{"room type overbooking 26", bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/room-types", Token: admin,
			Body: map[string]any{"name": "X", "max_guests": 2, "price_cents": 100, "currency": "EUR", "overbooking_pct": 26}}, 400, "invalid_request"},
		{"hotel bad region", bookingtest.Request{Method: "POST", Path: "/v1/hotels", Token: admin,
			Body: map[string]any{"name": "X", "city": "Y", "country": "DE", "timezone": "Europe/Berlin", "home_region": "mars"}}, 400, "invalid_request"},
		{"hotel bad timezone", bookingtest.Request{Method: "POST", Path: "/v1/hotels", Token: admin,
			Body: map[string]any{"name": "X", "city": "Y", "country": "DE", "timezone": "Mars/Olympus", "home_region": "us-east"}}, 400, "invalid_request"},
		{"unknown route", bookingtest.Request{Method: "GET", Path: "/v1/nothing"}, 404, "not_found"},
		{"wrong method", bookingtest.Request{Method: "DELETE", Path: "/v1/hotels/" + h.ID}, 405, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := env.Do(tc.req)
			if r.Status != tc.status || r.Code() != tc.code {
				t.Fatalf("got %d %q (%s), want %d %q", r.Status, r.Code(), truncate(r.Body), tc.status, tc.code)
			}
		})
	}
	if after := inventorySnapshot(t, env, h.ID); after != before {
		t.Fatalf("inventory changed: before %q, after %q", before, after)
	}
	var n int
	_ = dbtest.SQL(env.DB).QueryRow(context.Background(), `SELECT count(*) FROM reservations`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d reservations exist after only malformed requests", n)
	}
}

func inventorySnapshot(t *testing.T, env *bookingtest.Env, hotelID string) string {
	t.Helper()
	var s string
	err := dbtest.SQL(env.DB).QueryRow(context.Background(),
		`SELECT COALESCE(string_agg(night::TEXT || ':' || reserved || '/' || sell_limit, ',' ORDER BY room_type_id, night), '')
		 FROM room_inventory WHERE hotel_id = $1`, hotelID).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// A failure at COMMIT reaches the client as an error, never as a 201: a
// deferred foreign key added to this test's own database makes every outbox
// insert fail when the transaction commits.
func TestCommitFailureIsNotReportedAsSuccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(30))
	for _, stmt := range []string{
		// Seeding wrote catalog and inventory events; the fence is for new ones.
		`DELETE FROM outbox`,
		`CREATE TABLE commit_fence (id UUID PRIMARY KEY)`,
		`ALTER TABLE outbox ADD CONSTRAINT outbox_commit_fence FOREIGN KEY (event_id) REFERENCES commit_fence (id) DEFERRABLE INITIALLY DEFERRED`,
	} {
		if _, err := dbtest.SQL(env.DB).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	before := inventorySnapshot(t, env, h.ID)
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: env.Admin(),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(5), "check_out": bookingtest.Date(7), "quantity": 1}})
	if r.Status < 500 {
		t.Fatalf("hold answered %d %s although its commit failed", r.Status, r.Body)
	}
	if r.Header.Get("Content-Type") != "application/problem+json" || strings.Contains(string(r.Body), "outbox_commit_fence") {
		t.Fatalf("want a generic problem, got %s", r.Body)
	}
	var n int
	_ = dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM reservations`).Scan(&n)
	if n != 0 || inventorySnapshot(t, env, h.ID) != before {
		t.Fatalf("a failed commit left %d reservations or changed inventory", n)
	}
	if r.Status != http.StatusInternalServerError {
		t.Logf("status %d", r.Status)
	}
}
