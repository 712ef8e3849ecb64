package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
)

// An appointment carries the contact data its notifications need: kept on
// the appointment, shown back, and in its events (the read model and the
// notifier take it from there); a malformed address is refused.
func TestAppointmentContactFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startClinics(t, 0)
	clinicID := e.seedClinic("Europe/Berlin")
	doctorID := e.seedDoctor(clinicID, 30, false, allWeek("08:00", "12:00"))
	e.materialize(clinicID, bookingtest.Date(2), bookingtest.Date(3))
	slots := e.slots(clinicID, doctorID, bookingtest.Date(2))
	r, err := e.hold(ctx, clinicID, "pat", map[string]any{"guest_id": "pat", "slot_id": slots[0].ID, "contact_email": "bad"})
	if err != nil || r.Status != http.StatusBadRequest || r.Code() != "invalid_request" {
		t.Fatalf("bad e-mail: %v %d %s", err, r.Status, r.Body)
	}
	for _, token := range []string{"has space", "semi;colon", strings.Repeat("a", 1025)} {
		r, err = e.hold(ctx, clinicID, "pat", map[string]any{"guest_id": "pat", "slot_id": slots[0].ID, "contact_push_token": token})
		if err != nil || r.Status != http.StatusBadRequest || r.Code() != "invalid_request" {
			t.Fatalf("bad push token %.20q: %v %d %s", token, err, r.Status, r.Body)
		}
	}
	const pushToken = "fcm:APA91bH-x_y.z0123456789"
	r, err = e.hold(ctx, clinicID, "pat", map[string]any{"guest_id": "pat", "slot_id": slots[0].ID,
		"contact_email": "pat@example.test", "contact_phone": "+49 30 1234567", "contact_push_token": pushToken})
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("hold: %v %d %s", err, r.Status, r.Body)
	}
	id := r.JSON()["appointment_id"].(string)
	got := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinicID + "/appointments/" + id, Token: e.guest("pat")})
	if got.JSON()["contact_email"] != "pat@example.test" || got.JSON()["contact_phone"] != "+49 30 1234567" ||
		got.JSON()["contact_push_token"] != pushToken {
		t.Fatalf("appointment without its contact: %s", got.Body)
	}
	if n := e.queryInt(`SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND event_type = 'appointment.confirmed'
		AND payload->>'contact_email' = 'pat@example.test' AND payload->>'contact_phone' = '+49 30 1234567'
		AND payload->>'contact_push_token' = $2`, id, pushToken); n != 1 {
		t.Fatalf("%d confirmation events with the contact, want 1", n)
	}
}
