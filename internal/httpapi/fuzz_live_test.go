package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
)

// liveTarget is the booking service the end-to-end fuzz target talks to:
// the real handlers (hotels, clinics, payments, placements) on a fresh,
// migrated PostgreSQL database, with a small catalog and one booking of
// each kind to aim at.
type liveTarget struct {
	env     *bookingtest.Env
	handler http.Handler
	tokens  []string          // by the fuzz input's token selector; "" sends none
	vars    map[string]string // {placeholder} → a real id, a date …
}

func startLiveTarget(tb testing.TB) *liveTarget {
	var clinics *postgres.ClinicStore
	env := bookingtest.Start(tb, bookingtest.Options{Configure: func(cfg *httpapi.Config, st *postgres.Store) {
		clinics = postgres.NewClinicStore(st, 5*time.Minute)
		cfg.Clinics = clinics
		cfg.Payments = httpapi.NewPaymentWebhook(webhookSecret, st)
		cfg.Placements = postgres.NewPlacements(st.DB())
	}})
	ce := &clinicEnv{Env: env, Clinics: clinics}
	h := env.SeedHotel("", 20, 0, bookingtest.Date(1), bookingtest.Date(40))
	clinicID := ce.seedClinic("Europe/Berlin")
	doctorID := ce.seedDoctor(clinicID, 15, true, allWeek("09:00", "11:00"))
	ce.materialize(clinicID, bookingtest.Date(3), bookingtest.Date(5))
	slots := ce.slots(clinicID, doctorID, bookingtest.Date(3))
	admin := env.Admin()
	res := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": "alice", "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(10), "check_out": bookingtest.Date(12), "quantity": 1}})
	appt := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments", Token: admin, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": "alice", "slot_id": slots[0].ID}})
	if res.Status != http.StatusCreated || appt.Status != http.StatusCreated {
		tb.Fatalf("seed bookings: %d %s / %d %s", res.Status, res.Body, appt.Status, appt.Body)
	}
	return &liveTarget{
		env: env, handler: env.Server.Config.Handler,
		tokens: []string{"", env.Token("alice", berth.RoleGuest), env.Token("bob", berth.RoleGuest),
			env.Token("desk-1", berth.RoleStaff, clinicID), env.Token("desk-2", berth.RoleStaff, h.ID), admin, env.Token("ops-1", berth.RoleOps)},
		vars: map[string]string{
			"{hotel}":  h.ID,
			"{rt}":     h.RoomTypeID,
			"{res}":    res.JSON()["reservation_id"].(string),
			"{clinic}": clinicID,
			"{doctor}": doctorID,
			"{slot}":   slots[1].ID,
			"{slot0}":  slots[0].ID,
			"{appt}":   appt.JSON()["appointment_id"].(string),
			"{d1}":     bookingtest.Date(10),
			"{d2}":     bookingtest.Date(12),
			"{day}":    bookingtest.Date(3),
		},
	}
}

// expand replaces the placeholders of a fuzz input by the target's ids, so
// that mutations of a valid request reach the handlers' deeper paths.
func (lt *liveTarget) expand(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	for k, v := range lt.vars {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// liveInput is one fuzzed request.
type liveInput struct {
	method, path, query string
	token               uint8
	idemKey             string
	headerName          string
	headerValue         string
	body                []byte
}

func (lt *liveTarget) send(in liveInput) *httptest.ResponseRecorder {
	body := []byte(lt.expand(string(in.body)))
	r := httptest.NewRequest(http.MethodGet, "/", bytes.NewReader(body))
	r.Method = in.method
	r.URL = &url.URL{Path: lt.expand(in.path), RawQuery: lt.expand(in.query)}
	r.RequestURI = r.URL.RequestURI()
	if len(body) > 0 {
		r.Header.Set("Content-Type", "application/json")
	}
	if tok := lt.tokens[int(in.token)%len(lt.tokens)]; tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	if in.idemKey != "" {
		r.Header["Idempotency-Key"] = []string{lt.expand(in.idemKey)}
	}
	if in.headerName != "" {
		v := lt.expand(in.headerValue)
		if in.headerName == "Berth-Signature" && v == "{sign}" {
			v = payments.Sign([]byte(webhookSecret), time.Now(), body)
		}
		r.Header[in.headerName] = []string{v}
	}
	rec := httptest.NewRecorder()
	lt.handler.ServeHTTP(rec, r)
	return rec
}

// FuzzLiveRequests sends arbitrary requests — method, path, query, token,
// Idempotency-Key, one more header and the body, all from the fuzz input —
// to the live booking handlers on a real PostgreSQL database, and checks
// two things of every answer:
//
//   - it is never a 5xx: no input is an outage or a bug;
//   - a refused request (4xx) changes nothing: a digest of every row of
//     every table is the same before and after. The one change the contract
//     allows a refusal is recording a business outcome (sold_out,
//     invalid_state …) under the request's Idempotency-Key; then the key
//     must replay that answer exactly and change nothing more.
//
// Placeholders such as {hotel}, {res} or {slot} in the input stand for the
// ids of a seeded catalog, so mutations of the committed corpus
// (testdata/fuzz/FuzzLiveRequests) reach validation, authorization and the
// store rather than stopping at an unknown id. CI runs it for a few seconds
// (`make fuzz FUZZTIME=3s`); the corpus runs with every `go test`.
func FuzzLiveRequests(f *testing.F) {
	for _, s := range []liveInput{
		{"GET", "/v1/hotels/{hotel}/availability", "check_in={d1}&check_out={d2}", 0, "", "", "", nil},
		{"GET", "/v1/hotels", "city=munich&check_in={d1}&check_out={d2}&guests=2", 0, "", "", "", nil},
		{"POST", "/v1/hotels/{hotel}/reservations", "", 1, "k-1", "", "",
			[]byte(`{"guest_id":"alice","room_type_id":"{rt}","check_in":"{d1}","check_out":"{d2}","quantity":1,"contact_email":"a@example.com"}`)},
		{"POST", "/v1/hotels/{hotel}/reservations", "", 1, "k-2", "", "",
			[]byte(`{"guest_id":"alice","room_type_id":"{rt}","check_in":"{d1}","check_out":"{d2}","quantity":50}`)},
		{"GET", "/v1/hotels/{hotel}/reservations/{res}", "", 1, "", "", "", nil},
		{"POST", "/v1/hotels/{hotel}/reservations/{res}/confirm", "", 1, "k-3", "", "", []byte(`{"payment_ref":"pi_1"}`)},
		{"POST", "/v1/hotels/{hotel}/reservations/{res}/cancel", "", 4, "k-4", "", "", nil},
		{"POST", "/v1/hotels", "", 5, "", "", "", []byte(`{"name":"H","city":"C","country":"DE","timezone":"Europe/Berlin","home_region":"us-east"}`)},
		{"PUT", "/v1/hotels/{hotel}/room-types/{rt}/inventory", "", 5, "", "", "", []byte(`{"from":"{d1}","to":"{d2}","total_rooms":0}`)},
		{"GET", "/v1/clinics/{clinic}/doctors/{doctor}/slots", "date={day}", 0, "", "", "", nil},
		{"POST", "/v1/clinics/{clinic}/appointments", "", 2, "k-5", "", "", []byte(`{"guest_id":"bob","slot_id":"{slot0}"}`)},
		{"POST", "/v1/clinics/{clinic}/appointments", "", 3, "k-6", "", "", []byte(`{"guest_id":"carol","doctor_id":"{doctor}","window_start":"{day}T00:00:00Z","window_end":"{day}T23:00:00Z","channel":"counter"}`)},
		{"POST", "/v1/clinics/{clinic}/appointments/{appt}/reschedule", "", 1, "k-7", "", "", []byte(`{"slot_id":"{slot}"}`)},
		{"POST", "/v1/clinics/{clinic}/appointments/{appt}/confirm", "", 3, "k-8", "", "", []byte(`{"payment_ref":"desk"}`)},
		{"GET", "/v1/clinics/{clinic}/slots/{slot0}/audit", "", 3, "", "", "", nil},
		{"POST", "/v1/payments/webhook", "", 0, "", "Berth-Signature", "{sign}",
			[]byte(`{"id":"evt_1","type":"payment.succeeded","data":{"kind":"hotel","partition_id":"{hotel}","reservation_id":"{res}","payment_ref":"pi_1","amount_cents":20000}}`)},
		{"POST", "/v1/placements/hotel/{hotel}/move", "", 6, "", "", "", []byte(`{"to_region":"us-east"}`)},
		{"POST", "/v1/hotels/{hotel}/reservations", "", 1, "k-9", "", "",
			[]byte(`{"guest_id":"alice","room_type_id":"{rt}","check_in":"{d1}","check_out":"{d2}","quantity":1,"contact_phone":"+49\u0000"}`)},
		// The paths added with walks, visits, waitlists and Stripe's webhook.
		{"POST", "/v1/hotels/{hotel}/waitlist", "", 1, "k-10", "", "",
			[]byte(`{"guest_id":"alice","room_type_id":"{rt}","check_in":"{d1}","check_out":"{d2}"}`)},
		{"GET", "/v1/hotels/{hotel}/waitlist", "guest_id=alice", 1, "", "", "", nil},
		{"POST", "/v1/hotels/{hotel}/reservations/{res}/upgrade", "", 5, "k-11", "", "", []byte(`{"room_type_id":"{rt}"}`)},
		{"POST", "/v1/hotels/{hotel}/reservations/{res}/relocate", "", 5, "k-12", "", "", []byte(`{"hotel_id":"{hotel}"}`)},
		{"GET", "/v1/hotels/{hotel}/reservations/{res}/walk-options", "", 5, "", "", "", nil},
		{"POST", "/v1/clinics/{clinic}/appointments/{appt}/arrive", "", 3, "k-13", "", "", nil},
		{"POST", "/v1/clinics/{clinic}/appointments/{appt}/complete", "", 3, "k-14", "", "", nil},
		{"GET", "/v1/clinics/{clinic}/doctors/{doctor}/appointments", "date={day}", 3, "", "", "", nil},
		{"POST", "/v1/payments/stripe/webhook", "", 0, "", "Stripe-Signature", "t=1,v1=00", []byte(`{"id":"evt_2","type":"payment_intent.succeeded"}`)},
		// The clinic waitlists, a clinic's read and a stay's push token.
		{"POST", "/v1/clinics/{clinic}/waitlist", "", 2, "k-15", "", "",
			[]byte(`{"guest_id":"bob","doctor_id":"{doctor}","date":"{day}","window":{"from":"{day}T09:00:00Z","to":"{day}T08:00:00Z"}}`)},
		{"GET", "/v1/clinics/{clinic}/waitlist", "guest_id=bob&status=waiting", 2, "", "", "", nil},
		{"POST", "/v1/clinics/{clinic}/waitlist/{appt}/leave", "", 2, "k-16", "", "", nil},
		{"GET", "/v1/clinics/{clinic}", "", 0, "", "", "", nil},
		{"POST", "/v1/hotels/{hotel}/reservations", "", 1, "k-17", "", "",
			[]byte(`{"guest_id":"alice","room_type_id":"{rt}","check_in":"{d1}","check_out":"{d2}","contact_push_token":"tok en"}`)},
		{"GET", "/v1/hotels/{hotel}\x00", "", 0, "", "", "", nil},
		{"POST", "/v1/hotels/{hotel}/reservations", "", 1, "k\x00", "X-Note", "\xff", []byte("{\"guest_id\":\"alice\\u0000\"}")},
		{"DELETE", "/v1/hotels/{hotel}", "x=%zz", 5, "", "Content-Type", "text/plain", []byte(`[]`)},
	} {
		f.Add(s.method, s.path, s.query, s.token, s.idemKey, s.headerName, s.headerValue, s.body)
	}
	lt := startLiveTarget(f)
	f.Fuzz(func(t *testing.T, method, path, query string, token uint8, idemKey, headerName, headerValue string, body []byte) {
		snapshot := func() string {
			s, err := bookingtest.Snapshot(context.Background(), lt.env.DB)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		in := liveInput{method, path, query, token, idemKey, headerName, headerValue, body}
		before := snapshot()
		rec := lt.send(in)
		if rec.Code >= 500 {
			t.Fatalf("%q %q ?%q: %d %s", method, path, query, rec.Code, rec.Body)
		}
		if rec.Code < 400 {
			return
		}
		after := snapshot()
		if after == before {
			return
		}
		// A refusal that wrote: only a business outcome recorded under the
		// Idempotency-Key may, and the key must then replay it unchanged.
		if in.idemKey == "" {
			t.Fatalf("refused with %d without an Idempotency-Key, yet the database changed: %s", rec.Code, rec.Body)
		}
		again := lt.send(in)
		if again.Code != rec.Code || !bytes.Equal(again.Body.Bytes(), rec.Body.Bytes()) || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("refused with %d and the database changed, but the key does not replay it: %d %s", rec.Code, again.Code, again.Body)
		}
		if snapshot() != after {
			t.Fatal("the replay of a refused request changed the database")
		}
	})
}
