package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// The roles of the matrix: who sends the request.
var matrixRoles = []string{"none", "guest", "other-guest", "staff-here", "hotel-staff", "staff-elsewhere", "admin", "ops", "partner-key"}

// allowed lists, per route, the roles that may call it; every other role
// must get 401 (no or unusable credentials) or 403 (wrong principal).
type matrixCase struct {
	name    string
	allowed string // space-separated roles, or "*" for public
	// req builds a fresh request (mutating routes get their own target).
	req func(t *testing.T) bookingtest.Request
	// ok is the status an allowed caller gets.
	ok int
}

// Every booking-service route × every role: the expected status, from the
// tokens' roles, the guest who owns the resource and the staff token's
// partitions. Unknown and unusable credentials are always 401.
//
// The roles are API.md's: hotel reservations belong to the guest or an
// admin — staff get nothing there, even with the hotel in their token —
// while staff of a clinic may act on that clinic's appointments and desk
// actions (counter bookings, block, audit) and nothing of another clinic.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	var clinics *postgres.ClinicStore
	// Every case seeds a hold of alice's: the per-guest limits stay out of the way.
	env := bookingtest.Start(t, bookingtest.Options{GuestLimits: berth.GuestLimits{Holds: 1000, Quantity: 1000}, Configure: func(cfg *httpapi.Config, st *postgres.Store) {
		clinics = postgres.NewClinicStore(st, 5*time.Minute)
		cfg.Clinics = clinics
		cfg.ClinicWaitlist = clinics
		cfg.Placements = postgres.NewPlacements(st.DB())
	}})
	ce := &clinicEnv{Env: env, Clinics: clinics}
	h := env.SeedHotel("", 1000, 0, bookingtest.Date(0), bookingtest.Date(60))
	clinicID := ce.seedClinic("Europe/Berlin")
	doctorID := ce.seedDoctor(clinicID, 10, true, allWeek("06:00", "22:00"))
	ce.materialize(clinicID, bookingtest.Date(2), bookingtest.Date(4))
	slots := ce.slots(clinicID, doctorID, bookingtest.Date(3))
	if len(slots) < 60 {
		t.Fatalf("only %d slots", len(slots))
	}
	// takeSlot gives each request a slot of a doctor of its own, so the
	// one-slot-per-guest-per-doctor-per-day rule never interferes.
	takeSlot := func() string {
		d := ce.seedDoctor(clinicID, 30, true, allWeek("09:00", "10:00"))
		ce.materialize(clinicID, bookingtest.Date(5), bookingtest.Date(6))
		return ce.slots(clinicID, d, bookingtest.Date(5))[0].ID
	}

	tokens := map[string]string{
		"guest":           env.Token("alice", berth.RoleGuest),
		"other-guest":     env.Token("bob", berth.RoleGuest),
		"staff-here":      env.Token("desk-1", berth.RoleStaff, h.ID, clinicID),
		"staff-elsewhere": env.Token("desk-2", berth.RoleStaff, uuid.NewString()),
		// Staff whose token names only the hotel: the contract gives them
		// nothing on its reservations, nor anything of a clinic.
		"hotel-staff": env.Token("front-desk", berth.RoleStaff, h.ID),
		"admin":       env.Admin(),
		"ops":         env.Token("ops-1", berth.RoleOps),
	}
	admin := tokens["admin"]
	holdBody := func(guest string) map[string]any {
		return map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(10), "check_out": bookingtest.Date(11), "quantity": 1}
	}
	room := env.SeedRooms(h, "m", 1)[0]
	suite := roomType(t, env, h.ID, "Suite", 3, 30000, 1000, 0, "")
	var roomNumbers atomic.Int64
	// aliceReservation makes a reservation of alice's, held by admin.
	aliceReservation := func(t *testing.T) string {
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin,
			IdemKey: bookingtest.NewKey(), Body: holdBody("alice")})
		if r.Status != http.StatusCreated {
			t.Fatalf("seed reservation: %d %s", r.Status, r.Body)
		}
		return r.JSON()["reservation_id"].(string)
	}
	// arrivingToday makes a confirmed stay of alice's beginning today, with
	// a room of its own to check into.
	arrivingToday := func(t *testing.T) string {
		env.SeedRooms(h, fmt.Sprintf("a%d-", roomNumbers.Add(1)), 1)
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: bookingtest.NewKey(),
			Body: map[string]any{"guest_id": "alice", "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(0), "check_out": bookingtest.Date(2), "quantity": 1}})
		if r.Status != http.StatusCreated {
			t.Fatalf("seed stay: %d %s", r.Status, r.Body)
		}
		id := r.JSON()["reservation_id"].(string)
		if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/confirm", Token: admin,
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "p"}}); r.Status != http.StatusOK {
			t.Fatalf("seed confirm: %d %s", r.Status, r.Body)
		}
		return id
	}
	aliceAppointment := func(t *testing.T) string {
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments", Token: admin,
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "alice", "slot_id": takeSlot()}})
		if r.Status != http.StatusCreated {
			t.Fatalf("seed appointment: %d %s", r.Status, r.Body)
		}
		return r.JSON()["appointment_id"].(string)
	}
	// fullDoctor is a doctor of its own whose one slot on day 5 carol has
	// booked: a waitlist join for that day is accepted.
	fullDoctor := func(t *testing.T) string {
		d := ce.seedDoctor(clinicID, 30, false, allWeek("09:00", "09:30"))
		ce.materialize(clinicID, bookingtest.Date(5), bookingtest.Date(6))
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments", Token: admin,
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "carol", "slot_id": ce.slots(clinicID, d, bookingtest.Date(5))[0].ID}})
		if r.Status != http.StatusCreated {
			t.Fatalf("seed appointment: %d %s", r.Status, r.Body)
		}
		return d
	}
	joinBody := func(t *testing.T) map[string]any {
		return map[string]any{"guest_id": "alice", "doctor_id": fullDoctor(t), "date": bookingtest.Date(5)}
	}
	aliceWaits := func(t *testing.T) string {
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/waitlist", Token: admin,
			IdemKey: bookingtest.NewKey(), Body: joinBody(t)})
		if r.Status != http.StatusCreated {
			t.Fatalf("seed waitlist entry: %d %s", r.Status, r.Body)
		}
		return r.JSON()["entry_id"].(string)
	}
	// alicePaid holds a reservation for alice as alice and pays it: the
	// confirmation a guest can make carries a verified payment.
	alicePaid := func(t *testing.T) (string, string) {
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: tokens["guest"],
			IdemKey: bookingtest.NewKey(), Body: holdBody("alice")})
		if r.Status != http.StatusCreated {
			t.Fatalf("seed reservation: %d %s", r.Status, r.Body)
		}
		return r.JSON()["reservation_id"].(string), env.PayHold(r)
	}
	alicePaidAppointment := func(t *testing.T) (string, string) {
		d := ce.seedPricedDoctor(clinicID, 30, 4500, "EUR")
		ce.materialize(clinicID, bookingtest.Date(5), bookingtest.Date(6))
		slot := ce.slots(clinicID, d, bookingtest.Date(5))[0].ID
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments", Token: tokens["guest"],
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "alice", "slot_id": slot}})
		if r.Status != http.StatusCreated {
			t.Fatalf("seed appointment: %d %s", r.Status, r.Body)
		}
		return r.JSON()["appointment_id"].(string), env.PayHold(r)
	}
	// aliceVisitToday is a confirmed appointment of alice's whose day is
	// made the clinic's today: the reception acts on it.
	aliceVisitToday := func(t *testing.T) string {
		id := aliceAppointment(t) // held: its doctor wants prepayment, taken at the desk here
		if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments/" + id + "/confirm", Token: admin,
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "desk"}}); r.Status != http.StatusOK {
			t.Fatalf("seed confirm: %d %s", r.Status, r.Body)
		}
		berlin, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dbtest.SQL(env.DB).Exec(context.Background(), `UPDATE appointments SET local_date = $2 WHERE appointment_id = $1`,
			id, time.Now().In(berlin).Format(time.DateOnly)); err != nil {
			t.Fatal(err)
		}
		return id
	}
	hotelPath := "/v1/hotels/" + h.ID
	clinicPath := "/v1/clinics/" + clinicID
	cases := []matrixCase{
		{"create hotel", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: "/v1/hotels", Body: map[string]any{"name": "H", "city": "C", "country": "DE", "timezone": "Europe/Berlin", "home_region": "us-east"}}
		}, 201},
		{"read hotel", "*", func(*testing.T) bookingtest.Request { return bookingtest.Request{Method: "GET", Path: hotelPath} }, 200},
		{"create room type", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: hotelPath + "/room-types", Body: map[string]any{"name": "R", "max_guests": 2, "price_cents": 1, "currency": "EUR", "overbooking_pct": 0}}
		}, 201},
		{"set inventory", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "PUT", Path: hotelPath + "/room-types/" + h.RoomTypeID + "/inventory", Body: map[string]any{"from": bookingtest.Date(40), "to": bookingtest.Date(41), "total_rooms": 1000}}
		}, 200},
		{"availability", "*", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: hotelPath + "/availability?check_in=" + bookingtest.Date(10) + "&check_out=" + bookingtest.Date(11)}
		}, 200},
		{"hold for alice", "guest admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: hotelPath + "/reservations", IdemKey: bookingtest.NewKey(), Body: holdBody("alice")}
		}, 201},
		{"read alice's reservation", "guest admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: hotelPath + "/reservations/" + aliceReservation(t)}
		}, 200},
		{"confirm alice's reservation", "guest admin", func(t *testing.T) bookingtest.Request {
			id, ref := alicePaid(t)
			return bookingtest.Request{Method: "POST", Path: hotelPath + "/reservations/" + id + "/confirm", IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": ref}}
		}, 200},
		{"cancel alice's reservation", "guest admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: hotelPath + "/reservations/" + aliceReservation(t) + "/cancel", IdemKey: bookingtest.NewKey()}
		}, 200},
		{"create room", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: hotelPath + "/rooms", Body: map[string]any{"room_type_id": h.RoomTypeID, "number": fmt.Sprint(roomNumbers.Add(1)), "floor": 2}}
		}, 201},
		{"list rooms", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: hotelPath + "/rooms"}
		}, 200},
		{"room out of order", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: hotelPath + "/rooms/" + room + "/out-of-order", Body: map[string]any{"from": bookingtest.Date(40), "to": bookingtest.Date(42), "reason": "paint"}}
		}, 200},
		{"room back in order", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "DELETE", Path: hotelPath + "/rooms/" + room + "/out-of-order?from=" + bookingtest.Date(40) + "&to=" + bookingtest.Date(42)}
		}, 200},
		{"arrivals", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: hotelPath + "/arrivals?date=" + bookingtest.Date(1)}
		}, 200},
		{"check in", "admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: hotelPath + "/reservations/" + arrivingToday(t) + "/check-in", IdemKey: bookingtest.NewKey()}
		}, 200},
		{"check out", "admin", func(t *testing.T) bookingtest.Request {
			id := arrivingToday(t)
			if r := env.Do(bookingtest.Request{Method: "POST", Path: hotelPath + "/reservations/" + id + "/check-in", Token: admin, IdemKey: bookingtest.NewKey()}); r.Status != http.StatusOK {
				t.Fatalf("seed check-in: %d %s", r.Status, r.Body)
			}
			return bookingtest.Request{Method: "POST", Path: hotelPath + "/reservations/" + id + "/check-out", IdemKey: bookingtest.NewKey()}
		}, 200},
		{"walk options", "admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: hotelPath + "/reservations/" + arrivingToday(t) + "/walk-options"}
		}, 200},
		{"upgrade", "admin", func(t *testing.T) bookingtest.Request {
			env.SeedRooms(bookingtest.Hotel{ID: h.ID, RoomTypeID: suite}, fmt.Sprintf("s%d-", roomNumbers.Add(1)), 1)
			return bookingtest.Request{Method: "POST", Path: hotelPath + "/reservations/" + arrivingToday(t) + "/upgrade", IdemKey: bookingtest.NewKey(),
				Body: map[string]any{"room_type_id": suite}}
		}, 200},
		{"create clinic", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: "/v1/clinics", Body: map[string]any{"name": "C", "timezone": "Europe/Berlin", "home_region": "us-east"}}
		}, 201},
		{"create doctor", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/doctors", Body: map[string]any{"name": "D", "slot_minutes": 15, "prepay_required": false, "weekly": allWeek("08:00", "09:00")}}
		}, 201},
		{"materialize", "admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/slots/materialize", Body: map[string]any{"from": bookingtest.Date(2), "to": bookingtest.Date(3)}}
		}, 200},
		{"list slots", "*", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: clinicPath + "/doctors/" + doctorID + "/slots?date=" + bookingtest.Date(3)}
		}, 200},
		{"block slot", "staff-here admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/slots/" + takeSlot() + "/block"}
		}, 200},
		{"slot audit", "staff-here admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: clinicPath + "/slots/" + slots[0].ID + "/audit"}
		}, 200},
		{"appointment for alice", "guest staff-here admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/appointments", IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "alice", "slot_id": takeSlot()}}
		}, 201},
		{"read alice's appointment", "guest staff-here admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: clinicPath + "/appointments/" + aliceAppointment(t)}
		}, 200},
		{"confirm alice's appointment", "guest staff-here admin", func(t *testing.T) bookingtest.Request {
			id, ref := alicePaidAppointment(t)
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/appointments/" + id + "/confirm", IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": ref}}
		}, 200},
		{"cancel alice's appointment", "guest staff-here admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/appointments/" + aliceAppointment(t) + "/cancel", IdemKey: bookingtest.NewKey()}
		}, 200},
		{"reschedule alice's appointment", "guest staff-here admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/appointments/" + aliceAppointment(t) + "/reschedule", IdemKey: bookingtest.NewKey(), Body: map[string]any{"slot_id": takeSlot()}}
		}, 200},
		{"patient arrived", "staff-here admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/appointments/" + aliceVisitToday(t) + "/arrive", IdemKey: bookingtest.NewKey()}
		}, 200},
		{"visit completed", "staff-here admin", func(t *testing.T) bookingtest.Request {
			id := aliceVisitToday(t)
			if r := env.Do(bookingtest.Request{Method: "POST", Path: clinicPath + "/appointments/" + id + "/arrive", Token: admin, IdemKey: bookingtest.NewKey()}); r.Status != http.StatusOK {
				t.Fatalf("seed arrival: %d %s", r.Status, r.Body)
			}
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/appointments/" + id + "/complete", IdemKey: bookingtest.NewKey()}
		}, 200},
		{"doctor's day list", "staff-here admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: clinicPath + "/doctors/" + doctorID + "/appointments?date=" + bookingtest.Date(3)}
		}, 200},
		{"alice waits for a doctor", "guest staff-here admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/waitlist", IdemKey: bookingtest.NewKey(), Body: joinBody(t)}
		}, 201},
		{"read alice's clinic waitlist entry", "guest staff-here admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: clinicPath + "/waitlist/" + aliceWaits(t)}
		}, 200},
		{"alice leaves a doctor's line", "guest staff-here admin", func(t *testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "POST", Path: clinicPath + "/waitlist/" + aliceWaits(t) + "/leave", IdemKey: bookingtest.NewKey()}
		}, 200},
		{"list alice's clinic waitlist entries", "guest staff-here admin", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: clinicPath + "/waitlist?guest_id=alice"}
		}, 200},
		{"list placements", "ops", func(*testing.T) bookingtest.Request {
			return bookingtest.Request{Method: "GET", Path: "/v1/placements"}
		}, 200},
		{"move placement", "ops", func(*testing.T) bookingtest.Request {
			// A fresh hotel per call: the move itself is what is authorized.
			r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels", Token: admin, Body: map[string]any{"name": "M", "city": "C", "country": "DE", "timezone": "Europe/Berlin", "home_region": "us-east"}})
			return bookingtest.Request{Method: "POST", Path: "/v1/placements/hotel/" + r.JSON()["hotel_id"].(string) + "/move", Body: map[string]any{"to_region": "eu-west"}}
		}, 200},
		{"healthz", "*", func(*testing.T) bookingtest.Request { return bookingtest.Request{Method: "GET", Path: "/healthz"} }, 200},
		{"readyz", "*", func(*testing.T) bookingtest.Request { return bookingtest.Request{Method: "GET", Path: "/readyz"} }, 200},
	}
	for _, tc := range cases {
		allowed := map[string]bool{}
		for _, r := range strings.Fields(tc.allowed) {
			allowed[r] = true
		}
		for _, role := range matrixRoles {
			t.Run(tc.name+"/"+role, func(t *testing.T) {
				req := tc.req(t)
				req.Token = tokens[role]
				if role == "partner-key" {
					req.Header = map[string]string{"X-API-Key": "bpk_" + strings.Repeat("a", 40)}
				}
				r := env.Do(req)
				var want int
				switch {
				case tc.allowed == "*" || allowed[role]:
					want = tc.ok
				case role == "none" || role == "partner-key":
					want = http.StatusUnauthorized
				default:
					want = http.StatusForbidden
				}
				if r.Status != want {
					t.Fatalf("%s %s as %s: got %d %s, want %d", req.Method, req.Path, role, r.Status, truncate(r.Body), want)
				}
				if want >= 400 && r.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("denial without a problem document: %s", r.Header.Get("Content-Type"))
				}
			})
		}
	}
}

// Tokens that must never authenticate, on a protected route: expired, the
// wrong key, alg none, tampered claims, an unknown role, a huge header.
func TestRejectedCredentials(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(10))
	good := env.Token("alice", berth.RoleGuest)
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + strings.TrimRight(encodeSegment(`{"sub":"alice","role":"admin","exp":9999999999}`), "=") + "." + parts[2]
	none := encodeSegment(`{"alg":"none","typ":"JWT"}`) + "." + encodeSegment(`{"sub":"alice","role":"admin","exp":9999999999}`) + "."
	for name, header := range map[string]string{
		"tampered claims": "Bearer " + tampered,
		"alg none":        "Bearer " + none,
		"not bearer":      "Basic YWxpY2U6c2VjcmV0",
		"empty bearer":    "Bearer ",
		"garbage":         "Bearer " + strings.Repeat("x", 100),
		"oversized":       "Bearer " + strings.Repeat("a", 20000),
	} {
		t.Run(name, func(t *testing.T) {
			r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", IdemKey: bookingtest.NewKey(),
				Header: map[string]string{"Authorization": header},
				Body:   map[string]any{"guest_id": "alice", "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(3), "check_out": bookingtest.Date(4), "quantity": 1}})
			if r.Status != http.StatusUnauthorized {
				t.Fatalf("got %d %s, want 401", r.Status, truncate(r.Body))
			}
		})
	}
}
