package httpapi_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
)

// The development provider's intents are tokens (ADR 0027), and money is
// still never taken on trust: an intent id altered to say another amount,
// currency or reservation, or minted under a key that is not the
// deployment's, is refused by the pay endpoint (404) and by a guest's
// confirm (402), and a wrong client secret pays nothing. The reservation
// stays held, untouched, and nothing is stored; the hold's own intent, paid
// with its own secret, then confirms it.
func TestDevIntentTokensTakeNoMoneyOnTrust(t *testing.T) {
	t.Parallel()
	e := bookingtest.Start(t, bookingtest.Options{Configure: func(c *httpapi.Config, s *postgres.Store) {
		c.Payments = httpapi.NewPaymentWebhook(webhookSecret, s)
		c.DevPayments = &httpapi.DevPayments{Payer: c.PaymentProvider.(*postgres.DevPaymentProvider)}
	}})
	h := e.SeedHotel("", 3, 0, bookingtest.Date(0), bookingtest.Date(30))
	guest := e.Token("g-forge", berth.RoleGuest)
	r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: guest,
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g-forge", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(5), "check_out": bookingtest.Date(7), "quantity": 1}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["reservation_id"].(string)
	pay := r.JSON()["payment"].(map[string]any)
	intent, secret := pay["intent_id"].(string), pay["client_secret"].(string)
	if len(intent) > payments.MaxRefLen {
		t.Fatalf("intent id of %d characters; a payment_ref has at most %d", len(intent), payments.MaxRefLen)
	}
	due := payments.IntentRequest{Kind: "hotel", PartitionID: h.ID, ReservationID: id, AmountCents: 20000, Currency: "EUR",
		IdempotencyKey: "berth-hotel-" + id}
	forger, err := payments.NewDevIntents("not this deployment's key, but long enough")
	if err != nil {
		t.Fatal(err)
	}
	type forgery struct{ id, secret string }
	var forged []forgery
	for name, change := range map[string]func(*payments.IntentRequest){
		"exactly what is due": func(*payments.IntentRequest) {},
		"amount":              func(q *payments.IntentRequest) { q.AmountCents = 1 },
		"currency":            func(q *payments.IntentRequest) { q.Currency = "JPY" },
		"reservation":         func(q *payments.IntentRequest) { q.ReservationID = "5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f" },
	} {
		q := due
		change(&q)
		in, err := forger.Mint(q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		forged = append(forged, forgery{in.ID, in.ClientSecret})
	}
	// The hold's own intent with one byte changed, paid with its secret.
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(intent, payments.DevIntentPrefix))
	for _, i := range []int{2, len(raw) / 2, len(raw) - 1} {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x04
		forged = append(forged, forgery{payments.DevIntentPrefix + base64.RawURLEncoding.EncodeToString(b), secret})
	}
	// Its own id with another secret (its last two characters changed: to
	// "AA", or "AB" when they are "AA" already — about one secret in 256).
	other := "AA"
	if strings.HasSuffix(secret, other) {
		other = "AB"
	}
	forged = append(forged, forgery{intent, secret[:len(secret)-2] + other},
		forgery{intent, forger.Secret(intent)})
	confirm := func(ref string) bookingtest.Response {
		return e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/confirm",
			Token: guest, IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": ref}})
	}
	for _, f := range forged {
		if w := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/dev/payments/" + f.id + "/pay",
			Body: map[string]any{"client_secret": f.secret}}); w.Status != http.StatusNotFound || w.Code() != "not_found" {
			t.Fatalf("paying %s with %s: %d %s, want 404", f.id, f.secret, w.Status, w.Body)
		}
		if c := confirm(f.id); c.Status != http.StatusPaymentRequired {
			t.Fatalf("confirm with %s: %d %s, want 402", f.id, c.Status, c.Body)
		}
	}
	var stored int
	if err := dbtest.SQL(e.DB).QueryRow(context.Background(), `SELECT count(*) FROM dev_payment_intents`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if status, version := reservationState(t, e, h, id); status != "held" || version != 1 || stored != 0 {
		t.Fatalf("forgeries left the reservation %s v%d and %d intents stored", status, version, stored)
	}
	if c := confirm(intent); c.Status != http.StatusPaymentRequired || c.JSON()["reason"] != "not_succeeded" {
		t.Fatalf("confirm with the unpaid intent: %d %s", c.Status, c.Body)
	}
	if w := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/dev/payments/" + intent + "/pay",
		Body: map[string]any{"client_secret": secret}}); w.Status != http.StatusOK || w.JSON()["status"] != "succeeded" {
		t.Fatalf("paying the hold's own intent: %d %s", w.Status, w.Body)
	}
	if status, _ := reservationState(t, e, h, id); status != "confirmed" {
		t.Fatalf("the paid reservation is %s", status)
	}
}
