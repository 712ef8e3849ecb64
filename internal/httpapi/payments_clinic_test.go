package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// The payment webhook confirms a clinic hold whose doctor needs prepayment,
// releases a hold whose payment failed, and leaves a confirmed appointment
// alone when a late failure notice arrives.
func TestPaymentWebhookClinic(t *testing.T) {
	t.Parallel()
	var clinics *postgres.ClinicStore
	env := bookingtest.Start(t, bookingtest.Options{Configure: func(c *httpapi.Config, s *postgres.Store) {
		clinics = postgres.NewClinicStore(s, 5*time.Minute)
		c.Clinics = clinics
		c.Payments = httpapi.NewPaymentWebhook(webhookSecret, postgres.PaymentEffects{Hotels: s, Clinics: clinics})
	}})
	ce := &clinicEnv{Env: env, Clinics: clinics}
	clinicID := ce.seedClinic("Europe/Berlin")
	doctorID := ce.seedPricedDoctor(clinicID, 30, 5000, "EUR")
	ce.materialize(clinicID, bookingtest.Date(3), bookingtest.Date(4))
	slots := ce.slots(clinicID, doctorID, bookingtest.Date(3))
	hold := func(guest, slot string) string {
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments", Token: env.Admin(),
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": guest, "slot_id": slot}})
		if r.Status != http.StatusCreated || r.JSON()["status"] != "held" {
			t.Fatalf("hold: %d %s", r.Status, r.Body)
		}
		return r.JSON()["appointment_id"].(string)
	}
	send := func(typ, apptID string) bookingtest.Response {
		body, _ := json.Marshal(map[string]any{"id": "evt_" + uuid.NewString(), "type": typ, "data": map[string]any{
			"kind": "clinic", "partition_id": clinicID, "reservation_id": apptID, "payment_ref": "pay_1", "amount_cents": 5000, "currency": "EUR"}})
		return sendWebhook(env, body, payments.Sign([]byte(webhookSecret), time.Now(), body))
	}
	status := func(apptID string) string {
		r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinicID + "/appointments/" + apptID, Token: env.Admin()})
		return r.JSON()["status"].(string)
	}
	paid := hold("g1", slots[0].ID)
	if r := send("payment.succeeded", paid); r.Status != http.StatusOK || status(paid) != "confirmed" {
		t.Fatalf("payment.succeeded: %d %s → %s", r.Status, r.Body, status(paid))
	}
	if r := send("payment.failed", paid); r.Status != http.StatusOK || status(paid) != "confirmed" {
		t.Fatalf("a late payment.failed undid a confirmed appointment: %d %s → %s", r.Status, r.Body, status(paid))
	}
	failed := hold("g2", slots[1].ID)
	if r := send("payment.failed", failed); r.Status != http.StatusOK || status(failed) != "cancelled" {
		t.Fatalf("payment.failed: %d %s → %s", r.Status, r.Body, status(failed))
	}
	for _, s := range ce.slots(clinicID, doctorID, bookingtest.Date(3))[:2] {
		want := map[string]string{slots[0].ID: "booked", slots[1].ID: "open"}[s.ID]
		if s.Status != want {
			t.Errorf("slot %s is %s, want %s", s.ID, s.Status, want)
		}
	}
}
