package searchindex_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/searchindex"
)

// Handle reads an event as the relay publishes it (events.FromRecord,
// routed by its subject) in one decode of the fields it needs; a
// redelivered or older event changes nothing, a body that is not an event
// fails on its own account (never as a transient failure, which would retry
// it for ever), and events that are not the search's are skipped unread.
func TestHandleAppliesOnceAndSkipsRedeliveries(t *testing.T) {
	t.Parallel()
	x := searchindex.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { _ = x.Close() })
	applied := 0
	x.OnApplied = func(time.Time) { applied++ }
	const hotel, room = "8d0b6a8e-0f39-4d3c-9a55-3c1c1f1f6a01", "room-1"
	msg := func(kind, typ string, id string, data any) natsbus.Message {
		payload, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(events.FromRecord(events.Record{PartitionID: hotel, EventID: id, Kind: kind, Type: typ,
			AggregateID: "r1", AggregateVersion: 1, Payload: payload, CreatedAt: time.Now()}))
		if err != nil {
			t.Fatal(err)
		}
		return natsbus.Message{Subject: events.Subject(kind, hotel, typ), Data: body, Delivered: 1}
	}
	inventory := func(version int64, left int) reservation.InventoryChange {
		return reservation.InventoryChange{HotelID: hotel, RoomTypeID: room,
			Nights: []reservation.NightCount{{Night: "2027-03-01", Available: left, Version: version}}}
	}
	held := func(id string, version int64, left int) natsbus.Message {
		// A reservation event carries much besides its inventory; the
		// index reads only the inventory.
		return msg("hotel", reservation.EventHeld, id, map[string]any{"reservation_id": "r1", "guest_id": "g1",
			"nights": []string{"2027-03-01"}, "inventory": inventory(version, left)})
	}
	handle := func(m natsbus.Message) error { return x.Handle(context.Background(), m) }
	want := func(step string, n int) {
		t.Helper()
		if applied != n {
			t.Fatalf("%s: %d applied, want %d", step, applied, n)
		}
	}

	if err := handle(held("e2", 2, 3)); err != nil {
		t.Fatal(err)
	}
	want("a hold", 1)
	if s := x.Stats(); s.RoomTypes != 1 || s.Nights != 1 {
		t.Fatalf("after a hold: %+v, want one room type with one night", s)
	}
	if err := handle(held("e2", 2, 3)); err != nil {
		t.Fatal(err)
	}
	want("the same hold redelivered", 1)
	if err := handle(held("e1", 1, 4)); err != nil {
		t.Fatal(err)
	}
	want("an older hold after a newer one", 1)
	if err := handle(msg("hotel", reservation.EventInventory, "e3", inventory(3, 9))); err != nil {
		t.Fatal(err)
	}
	want("a newer inventory change", 2)
	if err := handle(msg("hotel", reservation.EventConfirmed, "e4", map[string]any{"reservation_id": "r1"})); err != nil {
		t.Fatal(err)
	}
	want("a confirm without inventory", 2)
	if err := handle(msg("clinic", "appointment.held", "e5", map[string]any{"inventory": 5})); err != nil {
		t.Fatalf("a clinic event: %v", err)
	}
	if s := x.Stats(); s.RoomTypes != 1 || s.Nights != 1 {
		t.Fatalf("at the end: %+v, want one room type with one night", s)
	}

	for name, m := range map[string]natsbus.Message{
		"inventory of the wrong shape": msg("hotel", reservation.EventHeld, "p1", map[string]any{"inventory": 5}),
		"not JSON":                     {Subject: events.Subject("hotel", hotel, reservation.EventHeld), Data: []byte("{")},
		"broken JSON in a field the index skips": {Subject: events.Subject("hotel", hotel, reservation.EventHeld),
			Data: []byte(`{"specversion":"1.0","id":"p5","source":{"a":tru},"data":{"guest_id":"g","inventory":null}}`)},
		"trailing garbage": {Subject: events.Subject("hotel", hotel, reservation.EventHeld),
			Data: []byte(`{"specversion":"1.0","id":"p6","data":{}} x`)},
		"no specversion": {Subject: events.Subject("hotel", hotel, reservation.EventHeld),
			Data: []byte(`{"id":"p3","data":{}}`)},
		"a subject that is not an event's": {Subject: "berth.hotel", Data: held("p4", 9, 1).Data},
	} {
		err := handle(m)
		if err == nil {
			t.Errorf("%s: handled", name)
		} else if searchindex.Transient(err) {
			t.Errorf("%s: %v counts as transient (would never be dead-lettered)", name, err)
		}
	}
	want("the poison events", 2)
}

// BenchmarkHandleHeld is the index's work per hold on every booking
// service: one reservation.held event as the relay publishes it, applied
// (the first time) or skipped by version (after).
func BenchmarkHandleHeld(b *testing.B) {
	x := searchindex.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	b.Cleanup(func() { _ = x.Close() })
	const hotel = "8d0b6a8e-0f39-4d3c-9a55-3c1c1f1f6a01"
	now := time.Now().UTC()
	r := reservation.Reservation{ID: "0b6f3c1e-4a8e-4a57-9b0c-2f1d3e4a5b6c", HotelID: hotel, RoomTypeID: "5f0e1d2c-3b4a-4958-8776-655443322110",
		GuestID: "guest-4711", Quantity: 1, Status: reservation.StatusHeld, HoldExpiresAt: now.Add(15 * time.Minute),
		TotalPriceCents: 12900, Currency: "EUR", ContactEmail: "guest@example.com", Version: 1, CreatedAt: now, UpdatedAt: now}
	payload, err := json.Marshal(reservation.WithInventory{Reservation: r, Inventory: &reservation.InventoryChange{HotelID: hotel,
		RoomTypeID: r.RoomTypeID, Nights: []reservation.NightCount{{Night: "2027-03-01", Available: 7, Version: 12}}}})
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(events.FromRecord(events.Record{PartitionID: hotel, EventID: "e1", Kind: "hotel", Type: reservation.EventHeld,
		AggregateID: r.ID, AggregateVersion: 1, Payload: payload, CreatedAt: now}))
	if err != nil {
		b.Fatal(err)
	}
	m := natsbus.Message{Subject: events.Subject("hotel", hotel, reservation.EventHeld), Data: body, Delivered: 1}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := x.Handle(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
}
