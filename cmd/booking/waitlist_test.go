package main

import (
	"net/http"
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
