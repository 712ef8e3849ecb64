package httpapi_test

// Findings #1–#3 of the money issue, each reproduced against the running
// handlers and the real database, then checked from the database.

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/payments"
	"github.com/google/uuid"
)

// Finding #1: a guest confirmed any hold with any payment_ref. A confirm
// whose payment_ref is no payment the provider reports as succeeded is 402
// payment_required, and nothing changes: the reservation stays held, no
// event is written.
func TestFindingConfirmWithoutPaymentIsRefused(t *testing.T) {
	t.Parallel()
	e := startWithWebhook(t)
	h := e.SeedHotel("", 3, 0, bookingtest.Date(0), bookingtest.Date(30))
	id := holdFor(t, e, h, "g-free")
	events := outboxCount(t, e)
	for _, ref := range []string{"free", "pi_made_up", "pay-" + id[:8]} {
		r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/confirm",
			Token: e.Token("g-free", berth.RoleGuest), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": ref}})
		if r.Status != http.StatusPaymentRequired || r.Code() != "payment_required" {
			t.Fatalf("confirm with payment_ref %q: %d %s, want 402 payment_required", ref, r.Status, r.Body)
		}
	}
	if status, version := reservationState(t, e, h, id); status != "held" || version != 1 {
		t.Fatalf("refused confirms left the reservation %s v%d, want held v1", status, version)
	}
	if n := outboxCount(t, e); n != events {
		t.Fatalf("refused confirms wrote %d event(s)", n-events)
	}
}

// Finding #1, clinics: the same for an appointment of a doctor who requires
// prepayment.
func TestFindingConfirmAppointmentWithoutPaymentIsRefused(t *testing.T) {
	t.Parallel()
	ce := startClinics(t, 5*time.Minute)
	clinicID := ce.seedClinic("Europe/Berlin")
	doctorID := ce.seedDoctor(clinicID, 30, true, allWeek("08:00", "12:00"))
	ce.materialize(clinicID, bookingtest.Date(3), bookingtest.Date(4))
	slot := ce.slots(clinicID, doctorID, bookingtest.Date(3))[0]
	r := ce.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments", Token: ce.guest("g-free"),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g-free", "slot_id": slot.ID}})
	if r.Status != http.StatusCreated || r.JSON()["status"] != "held" {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	apptID := r.JSON()["appointment_id"].(string)
	c := ce.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments/" + apptID + "/confirm",
		Token: ce.guest("g-free"), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "free"}})
	if c.Status != http.StatusPaymentRequired || c.Code() != "payment_required" {
		t.Fatalf("confirm with payment_ref free: %d %s, want 402 payment_required", c.Status, c.Body)
	}
	if n := ce.queryInt(`SELECT count(*) FROM appointments WHERE appointment_id = $1 AND status = 'held' AND version = 1`, apptID); n != 1 {
		t.Fatal("the refused confirm changed the appointment")
	}
	if n := ce.queryInt(`SELECT count(*) FROM slots WHERE slot_id = $1 AND status = 'held'`, slot.ID); n != 1 {
		t.Fatal("the refused confirm changed the slot")
	}
}

// Finding #2: webhook event ids shared the per-partition key space with the
// clients' Idempotency-Keys, so a client that sent "payment:evt_x" first
// made the provider's real evt_x answer 422 and the payment was never
// applied.
func TestFindingWebhookKeysAreTheirOwnSpace(t *testing.T) {
	t.Parallel()
	e := startWithWebhook(t)
	h := e.SeedHotel("", 3, 0, bookingtest.Date(0), bookingtest.Date(30))
	evt := "evt_" + uuid.NewString()
	// A guest squats the key the webhook would use.
	squat := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: e.Token("g-squat", berth.RoleGuest),
		IdemKey: "payment:" + evt, Body: map[string]any{"guest_id": "g-squat", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(5), "check_out": bookingtest.Date(7), "quantity": 1}})
	if squat.Status != http.StatusCreated {
		t.Fatalf("squatting hold: %d %s", squat.Status, squat.Body)
	}
	id := holdFor(t, e, h, "g-victim")
	body := webhookBody(t, evt, "payment.succeeded", "hotel", h.ID, id, 20000, "EUR")
	r := sendWebhook(e, body, payments.Sign([]byte(webhookSecret), time.Now(), body))
	if r.Status != http.StatusOK || r.JSON()["outcome"] != "applied" {
		t.Fatalf("webhook after a squatted key: %d %s, want 200 applied", r.Status, r.Body)
	}
	if status, _ := reservationState(t, e, h, id); status != "confirmed" {
		t.Fatalf("the paid reservation is %s, want confirmed", status)
	}
	// And the other way round: the client's key is still its own.
	again := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: e.Token("g-squat", berth.RoleGuest),
		IdemKey: "payment:" + evt, Body: map[string]any{"guest_id": "g-squat", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(5), "check_out": bookingtest.Date(7), "quantity": 1}})
	if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(squat.Body) {
		t.Fatalf("the client's replay: %d %s", again.Status, again.Body)
	}
}

// Finding #3: the webhook ignored amount and currency, so amount_cents 1 (or
// -5) confirmed a 20,000-cent reservation. A signed event whose amount or
// currency differs from the reservation's confirms nothing, requests a
// refund of what was paid, and answers 200 saying so; a malformed amount is
// a 400 that changes nothing.
func TestFindingWebhookChecksAmountAndCurrency(t *testing.T) {
	t.Parallel()
	e := startWithWebhook(t)
	h := e.SeedHotel("", 10, 0, bookingtest.Date(0), bookingtest.Date(30))
	secret := []byte(webhookSecret)
	mismatches := []struct {
		name     string
		amount   int64
		currency string
	}{
		{"one cent", 1, "EUR"},
		{"one cent short", 19999, "EUR"},
		{"one cent over", 20001, "EUR"},
		{"another currency", 20000, "USD"},
	}
	for _, m := range mismatches {
		id := holdFor(t, e, h, "g-"+m.name)
		evt := "evt_" + uuid.NewString()
		body := webhookBody(t, evt, "payment.succeeded", "hotel", h.ID, id, m.amount, m.currency)
		r := sendWebhook(e, body, payments.Sign(secret, time.Now(), body))
		if r.Status != http.StatusOK || r.JSON()["outcome"] != "payment_mismatch" || r.JSON()["refund_requested"] != true {
			t.Fatalf("%s: %d %s, want 200 payment_mismatch with refund_requested", m.name, r.Status, r.Body)
		}
		if status, version := reservationState(t, e, h, id); status != "held" || version != 1 {
			t.Fatalf("%s: the reservation is %s v%d, want held v1", m.name, status, version)
		}
		var (
			amount   int64
			currency string
		)
		if err := dbtest.SQL(e.DB).QueryRow(t.Context(), `SELECT (payload->>'amount_cents')::INT8, payload->>'currency'
			FROM outbox WHERE aggregate_id = $1 AND event_type = 'refund_requested'`, id).Scan(&amount, &currency); err != nil {
			t.Fatalf("%s: no refund_requested event: %v", m.name, err)
		}
		if amount != m.amount || currency != m.currency {
			t.Fatalf("%s: refund of %d %s, want what was paid: %d %s", m.name, amount, currency, m.amount, m.currency)
		}
		// The provider's redelivery is a replay: still one refund.
		sendWebhook(e, body, payments.Sign(secret, time.Now(), body))
		var n int
		_ = dbtest.SQL(e.DB).QueryRow(t.Context(), `SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND event_type = 'refund_requested'`, id).Scan(&n)
		if n != 1 {
			t.Fatalf("%s: %d refund events after a redelivery, want 1", m.name, n)
		}
	}
	for _, bad := range []map[string]any{
		{"amount_cents": -5, "currency": "EUR"},
		{"amount_cents": 1},                       // no currency: nothing to compare
		{"amount_cents": 20000, "currency": "eu"}, // not ISO 4217
	} {
		id := holdFor(t, e, h, "g-bad")
		data := map[string]any{"kind": "hotel", "partition_id": h.ID, "reservation_id": id, "payment_ref": "pi_x"}
		for k, v := range bad {
			data[k] = v
		}
		body, _ := json.Marshal(map[string]any{"id": "evt_" + uuid.NewString(), "type": "payment.succeeded", "data": data})
		r := sendWebhook(e, body, payments.Sign(secret, time.Now(), body))
		if r.Status != http.StatusBadRequest || r.Code() != "invalid_request" {
			t.Fatalf("%v: %d %s, want 400 invalid_request", bad, r.Status, r.Body)
		}
		if status, _ := reservationState(t, e, h, id); status != "held" {
			t.Fatalf("%v: the reservation is %s, want held", bad, status)
		}
	}
}

func webhookBody(t *testing.T, id, typ, kind, partitionID, reservationID string, amount int64, currency string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": id, "type": typ, "data": map[string]any{
		"kind": kind, "partition_id": partitionID, "reservation_id": reservationID, "payment_ref": "pi_" + id,
		"amount_cents": amount, "currency": currency}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
