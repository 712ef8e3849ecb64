package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/natsbus/natstest"
)

// The service as `booking serve` wires it, with NATS: a cancellation's
// event goes through the outbox relay and JetStream to the region's
// waitlist consumer, which offers the freed room to the first waiter.
func TestWaitlistOfferThroughTheEventStream(t *testing.T) {
	ns := natstest.Start(t)
	s := startServiceWith(t, serviceOptions{natsURL: ns.URL})
	h := s.SeedHotel("", 1, 0, bookingtest.Date(0), bookingtest.Date(60))
	in, out := bookingtest.Date(10), bookingtest.Date(12)
	hold := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: s.Token("a", "guest"),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "a", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}})
	if hold.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", hold.Status, hold.Body)
	}
	joined := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/waitlist", Token: s.Token("w", "guest"),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "w", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out}})
	if joined.Status != http.StatusCreated {
		t.Fatalf("join: %d %s", joined.Status, joined.Body)
	}
	entry := "/v1/hotels/" + h.ID + "/waitlist/" + joined.JSON()["entry_id"].(string)
	if r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + hold.JSON()["reservation_id"].(string) + "/cancel",
		Token: s.Token("a", "guest"), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := s.Do(bookingtest.Request{Method: "GET", Path: entry, Token: s.Token("w", "guest")})
		if r.Status == http.StatusOK && r.JSON()["status"] == "offered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no offer 30s after the cancellation: %d %s\n%s", r.Status, r.Body, s.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.AssertInventory()
}

// The same for a clinic: a cancelled appointment's event goes through the
// relay and JetStream to the region's clinic waitlist consumer, which holds
// the freed slot for the first patient in the doctor's line; the patient
// confirms the offer and the entry is booked.
func TestClinicWaitlistOfferThroughTheEventStream(t *testing.T) {
	ns := natstest.Start(t)
	s := startServiceWith(t, serviceOptions{natsURL: ns.URL})
	admin := s.Admin()
	r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics", Token: admin,
		Body: map[string]any{"name": "C", "timezone": "UTC", "home_region": "us-east"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("clinic: %d %s", r.Status, r.Body)
	}
	clinic := "/v1/clinics/" + r.JSON()["clinic_id"].(string)
	weekly := []map[string]any{}
	for d := 1; d <= 7; d++ {
		weekly = append(weekly, map[string]any{"weekday": d, "start": "09:00", "end": "09:30"})
	}
	r = s.Do(bookingtest.Request{Method: "POST", Path: clinic + "/doctors", Token: admin,
		Body: map[string]any{"name": "D", "slot_minutes": 30, "prepay_required": false, "weekly": weekly}})
	if r.Status != http.StatusCreated {
		t.Fatalf("doctor: %d %s", r.Status, r.Body)
	}
	doctor := r.JSON()["doctor_id"].(string)
	day := bookingtest.Date(6)
	if r := s.Do(bookingtest.Request{Method: "POST", Path: clinic + "/slots/materialize", Token: admin,
		Body: map[string]any{"from": day, "to": bookingtest.Date(7)}}); r.Status != http.StatusOK {
		t.Fatalf("materialize: %d %s", r.Status, r.Body)
	}
	r = s.Do(bookingtest.Request{Method: "POST", Path: clinic + "/appointments", Token: s.Token("a", "guest"), IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": "a", "doctor_id": doctor, "window_start": day + "T00:00:00Z", "window_end": day + "T23:00:00Z"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	appt := r.JSON()["appointment_id"].(string)
	joined := s.Do(bookingtest.Request{Method: "POST", Path: clinic + "/waitlist", Token: s.Token("w", "guest"),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "w", "doctor_id": doctor, "date": day}})
	if joined.Status != http.StatusCreated {
		t.Fatalf("join: %d %s", joined.Status, joined.Body)
	}
	entry := clinic + "/waitlist/" + joined.JSON()["entry_id"].(string)
	if r := s.Do(bookingtest.Request{Method: "POST", Path: clinic + "/appointments/" + appt + "/cancel",
		Token: s.Token("a", "guest"), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(30 * time.Second)
	var offer map[string]any
	for {
		r := s.Do(bookingtest.Request{Method: "GET", Path: entry, Token: s.Token("w", "guest")})
		if r.Status == http.StatusOK && r.JSON()["status"] == "offered" {
			offer = r.JSON()["offer"].(map[string]any)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no offer 30s after the cancellation: %d %s\n%s", r.Status, r.Body, s.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := s.Do(bookingtest.Request{Method: "POST", Path: clinic + "/appointments/" + offer["appointment_id"].(string) + "/confirm",
		Token: s.Token("w", "guest"), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "none"}}); r.Status != http.StatusOK {
		t.Fatalf("confirm the offer: %d %s", r.Status, r.Body)
	}
	if r := s.Do(bookingtest.Request{Method: "GET", Path: entry, Token: s.Token("w", "guest")}); r.JSON()["status"] != "booked" {
		t.Fatalf("entry after the confirmation: %s", r.Body)
	}
	s.AssertSlots(strings.TrimPrefix(clinic, "/v1/clinics/"))
}
