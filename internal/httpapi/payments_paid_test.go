package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
)

// confirmation is the audit row of a confirmation.
type confirmation struct {
	method, ref, currency, subject, role string
	amount                               int64
}

func confirmationOf(t *testing.T, e *bookingtest.Env, id string) (confirmation, bool) {
	t.Helper()
	var c confirmation
	err := dbtest.SQL(e.DB).QueryRow(context.Background(), `SELECT method, payment_ref, amount_cents, currency, actor_subject, actor_role
		FROM payment_confirmations WHERE reservation_id = $1`, id).Scan(&c.method, &c.ref, &c.amount, &c.currency, &c.subject, &c.role)
	if err != nil {
		return c, false
	}
	return c, true
}

// A guest confirms with the intent the hold answered, once the provider
// reports it paid; a paid intent of another reservation (same price), an
// unpaid intent, or nothing at all is 402 and changes nothing. Staff and
// admins confirm money taken at the desk, and every confirmation leaves an
// audit row: how, how much, who.
func TestPaidConfirmations(t *testing.T) {
	t.Parallel()
	var clinics *postgres.ClinicStore
	e := bookingtest.Start(t, bookingtest.Options{Configure: func(c *httpapi.Config, s *postgres.Store) {
		clinics = postgres.NewClinicStore(s, 5*time.Minute)
		c.Clinics = clinics
	}})
	h := e.SeedHotel("", 5, 0, bookingtest.Date(0), bookingtest.Date(30))
	guest := e.Token("g-paid", berth.RoleGuest)
	hold := func() bookingtest.Response {
		r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: guest,
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g-paid", "room_type_id": h.RoomTypeID,
				"check_in": bookingtest.Date(5), "check_out": bookingtest.Date(7), "quantity": 1}})
		if r.Status != http.StatusCreated {
			t.Fatalf("hold: %d %s", r.Status, r.Body)
		}
		return r
	}
	confirm := func(id, ref, token string) bookingtest.Response {
		return e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/confirm",
			Token: token, IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": ref}})
	}
	a, b := hold(), hold()
	idA, idB := a.JSON()["reservation_id"].(string), b.JSON()["reservation_id"].(string)
	unpaidB := b.JSON()["payment"].(map[string]any)["intent_id"].(string)
	paidA := e.PayHold(a)

	for name, tc := range map[string]struct{ ref, reason string }{
		"another reservation's paid intent": {paidA, "other_reservation"},
		"its own unpaid intent":             {unpaidB, "not_succeeded"},
	} {
		r := confirm(idB, tc.ref, guest)
		if r.Status != http.StatusPaymentRequired || r.JSON()["reason"] != tc.reason {
			t.Fatalf("%s: %d %s, want 402 with reason %s", name, r.Status, r.Body, tc.reason)
		}
	}
	if status, version := reservationState(t, e, h, idB); status != "held" || version != 1 {
		t.Fatalf("refused confirms left %s v%d", status, version)
	}
	if r := confirm(idA, paidA, guest); r.Status != http.StatusOK || r.JSON()["status"] != "confirmed" {
		t.Fatalf("confirm with the paid intent: %d %s", r.Status, r.Body)
	}
	if c, ok := confirmationOf(t, e, idA); !ok || c != (confirmation{"online", paidA, "EUR", "g-paid", "guest", 20000}) {
		t.Fatalf("audit row of the online confirmation: %+v %v", c, ok)
	}
	// Paying at the desk: an admin confirms B without the provider.
	if r := confirm(idB, "cash-0017", e.Admin()); r.Status != http.StatusOK || r.JSON()["status"] != "confirmed" {
		t.Fatalf("desk confirmation: %d %s", r.Status, r.Body)
	}
	if c, ok := confirmationOf(t, e, idB); !ok || c != (confirmation{"desk", "cash-0017", "EUR", "test-admin", "admin", 20000}) {
		t.Fatalf("audit row of the desk confirmation: %+v %v", c, ok)
	}

	// Clinics: a priced prepaid doctor's hold answers its intent.
	ce := &clinicEnv{Env: e, Clinics: clinics}
	clinicID := ce.seedClinic("Europe/Berlin")
	priced := ce.seedPricedDoctor(clinicID, 30, 4500, "EUR")
	unpriced := ce.seedDoctor(clinicID, 30, true, allWeek("08:00", "12:00"))
	ce.materialize(clinicID, bookingtest.Date(3), bookingtest.Date(4))
	holdAppt := func(doctor string) bookingtest.Response {
		r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments", Token: guest,
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g-paid", "slot_id": ce.slots(clinicID, doctor, bookingtest.Date(3))[0].ID}})
		if r.Status != http.StatusCreated || r.JSON()["status"] != "held" {
			t.Fatalf("appointment hold: %d %s", r.Status, r.Body)
		}
		return r
	}
	confirmAppt := func(id, ref, token string) bookingtest.Response {
		return e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments/" + id + "/confirm",
			Token: token, IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": ref}})
	}
	ap := holdAppt(priced)
	if p, _ := ap.JSON()["payment"].(map[string]any); p["amount_cents"] != 4500.0 || p["currency"] != "EUR" {
		t.Fatalf("the prepaid appointment's payment: %s", ap.Body)
	}
	apID := ap.JSON()["appointment_id"].(string)
	if r := confirmAppt(apID, paidA, guest); r.Status != http.StatusPaymentRequired {
		t.Fatalf("an appointment confirmed with a hotel's payment: %d %s", r.Status, r.Body)
	}
	if r := confirmAppt(apID, e.PayHold(ap), guest); r.Status != http.StatusOK || r.JSON()["status"] != "confirmed" {
		t.Fatalf("confirm the paid appointment: %d %s", r.Status, r.Body)
	}
	if c, ok := confirmationOf(t, e, apID); !ok || c.method != "online" || c.amount != 4500 {
		t.Fatalf("audit row of the appointment: %+v %v", c, ok)
	}
	// Without a price the appointment is paid at the desk: no intent, a
	// guest cannot confirm it, the clinic's staff can.
	up := holdAppt(unpriced)
	if _, has := up.JSON()["payment"]; has {
		t.Fatalf("an unpriced appointment answered a payment: %s", up.Body)
	}
	upID := up.JSON()["appointment_id"].(string)
	if r := confirmAppt(upID, "anything", guest); r.Status != http.StatusPaymentRequired {
		t.Fatalf("guest confirms an unpriced prepaid appointment: %d %s", r.Status, r.Body)
	}
	staff := e.Token("desk-9", berth.RoleStaff, clinicID)
	if r := confirmAppt(upID, "card-terminal-4711", staff); r.Status != http.StatusOK || r.JSON()["status"] != "confirmed" {
		t.Fatalf("staff confirms at the desk: %d %s", r.Status, r.Body)
	}
	if c, ok := confirmationOf(t, e, upID); !ok || c.method != "desk" || c.subject != "desk-9" || c.role != "staff" {
		t.Fatalf("audit row of the desk confirmation: %+v %v", c, ok)
	}
}

// The development provider's pay endpoint settles an intent with its
// client secret and sends the signed webhook, which confirms the hold; a
// second payment redelivers the same event (a replay). Without the
// development wiring the route does not exist.
func TestDevPayEndpoint(t *testing.T) {
	t.Parallel()
	e := bookingtest.Start(t, bookingtest.Options{Configure: func(c *httpapi.Config, s *postgres.Store) {
		c.Payments = httpapi.NewPaymentWebhook(webhookSecret, s)
		c.DevPayments = &httpapi.DevPayments{Payer: c.PaymentProvider.(*postgres.DevPaymentProvider)}
	}})
	h := e.SeedHotel("", 3, 0, bookingtest.Date(0), bookingtest.Date(30))
	r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: e.Token("g-dev", berth.RoleGuest),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g-dev", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(5), "check_out": bookingtest.Date(7), "quantity": 1}})
	id := r.JSON()["reservation_id"].(string)
	pay := r.JSON()["payment"].(map[string]any)
	intent, secret := pay["intent_id"].(string), pay["client_secret"].(string)
	path := "/v1/dev/payments/" + intent + "/pay"
	if w := e.Do(bookingtest.Request{Method: "POST", Path: path, Body: map[string]any{"client_secret": "wrong"}}); w.Status != http.StatusNotFound {
		t.Fatalf("a wrong client secret: %d %s", w.Status, w.Body)
	}
	if status, _ := reservationState(t, e, h, id); status != "held" {
		t.Fatalf("a refused payment changed the reservation to %s", status)
	}
	p := e.Do(bookingtest.Request{Method: "POST", Path: path, Body: map[string]any{"client_secret": secret}})
	hook, _ := p.JSON()["webhook"].(map[string]any)
	answer, _ := hook["answer"].(map[string]any)
	if p.Status != http.StatusOK || p.JSON()["status"] != "succeeded" || hook["status"] != 200.0 || answer["outcome"] != "applied" {
		t.Fatalf("pay: %d %s", p.Status, p.Body)
	}
	if status, _ := reservationState(t, e, h, id); status != "confirmed" {
		t.Fatalf("paid reservation is %s, want confirmed", status)
	}
	if c, ok := confirmationOf(t, e, id); !ok || c != (confirmation{"webhook", intent, "EUR", "payment-provider", "system", 20000}) {
		t.Fatalf("audit row: %+v %v", c, ok)
	}
	events := outboxCount(t, e)
	again := e.Do(bookingtest.Request{Method: "POST", Path: path, Body: map[string]any{"client_secret": secret}})
	if again.Status != http.StatusOK || outboxCount(t, e) != events {
		t.Fatalf("paying twice: %d %s, %d new event(s)", again.Status, again.Body, outboxCount(t, e)-events)
	}
	// The guest's own confirm with the paid intent is the same confirmation.
	c := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/confirm",
		Token: e.Token("g-dev", berth.RoleGuest), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": intent}})
	if c.Status != http.StatusOK || c.JSON()["status"] != "confirmed" {
		t.Fatalf("guest confirm after the webhook: %d %s", c.Status, c.Body)
	}

	plain := bookingtest.Start(t, bookingtest.Options{})
	if r := plain.Do(bookingtest.Request{Method: "POST", Path: path, Body: map[string]any{"client_secret": secret}}); r.Status != http.StatusNotFound {
		t.Fatalf("the pay endpoint without development wiring: %d %s", r.Status, r.Body)
	}
}
