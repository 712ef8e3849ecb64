package reservation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// fuzzReservation is a reservation of the fuzzers' values.
func fuzzReservation(id, guest, currency, contact string, price int64, at time.Time, quantity int, rooms bool) Reservation {
	in, _ := ParseDate("2027-03-01")
	out, _ := ParseDate("2027-03-04")
	r := Reservation{ID: id, HotelID: id, RoomTypeID: guest, GuestID: guest, CheckIn: in, CheckOut: out, Quantity: quantity,
		Status: Status(currency), HoldExpiresAt: at, TotalPriceCents: price, Currency: currency, ContactEmail: contact,
		PaymentRef: guest, WaitlistEntryID: contact, Version: price, CreatedAt: at.Add(time.Hour), UpdatedAt: at}
	if rooms {
		r.Rooms = []AssignedRoom{}
	}
	return r
}

// plainTimes says whether json.Marshal can encode every time of r
// (MarshalJSON refuses a year outside 0–9999 and an offset of a day).
func plainTimes(at time.Time, offset int) bool {
	return at.Year() >= 0 && at.Year() <= 9999 && offset > -24*3600 && offset < 24*3600
}

// FuzzReservationJSON: a hold's answer encoded by hand is json.Marshal's,
// byte for byte (stored with the Idempotency-Key and replayed), and the
// answers a hold gives take the hand way.
func FuzzReservationJSON(f *testing.F) {
	f.Add("5b0f6f2e-3c1d-4d6e-9f70-8a9b0c1d2e3f", "guest-1", "EUR", "", int64(38700), int64(1800000000), int64(123456789), 0, 2, false)
	f.Add("r", "Zoë <&> \u2028 \"q\"", "", "a@example.com", int64(-1), int64(-62135596800), int64(0), 3600*5+1800, 0, true)
	f.Add("r", "g", "EUR", "\xff", int64(0), int64(253402300799), int64(999999999), -3600*23-59*60, 1, false)
	f.Add("r", "g", "EUR", "", int64(0), int64(253402300800), int64(0), 0, 1, false)
	f.Add("r", "g", "EUR", "", int64(0), int64(0), int64(0), 24*3600, 1, false)
	f.Fuzz(func(t *testing.T, id, guest, currency, contact string, price, unix, nanos int64, offset, quantity int, rooms bool) {
		at := time.Unix(unix, nanos).In(time.FixedZone("z", offset))
		r := fuzzReservation(id, guest, currency, contact, price, at, quantity, rooms)
		want, err := json.Marshal(r)
		got, ok := r.AppendJSON(nil)
		if ok && (err != nil || string(got) != string(want)) {
			t.Fatalf("by hand %s (ok), json.Marshal %s (%v)", got, want, err)
		}
		if !ok && err == nil && plainTimes(at, offset) {
			t.Fatalf("a plain hold's answer did not take the hand way: %s", want)
		}
	})
}

// FuzzWithInventoryJSON: a reservation event's payload encoded by hand
// (the reservation.held event every hold writes to the outbox) is
// json.Marshal's, byte for byte, with or without its inventory and
// whatever its nights hold, and a plain hold's payload takes the hand way.
func FuzzWithInventoryJSON(f *testing.F) {
	f.Add("5b0f6f2e-3c1d-4d6e-9f70-8a9b0c1d2e3f", "guest-1", "EUR", "", int64(38700), int64(1800000000), int64(123456789), 0, 2,
		"2027-03-01", 3, int64(7), uint8(3))
	f.Add("r", "Zoë <&> \u2028 \"q\"", "", "a@example.com", int64(-1), int64(-62135596800), int64(0), 3600*5+1800, 0, "<\xff>", -1,
		int64(-9), uint8(1))
	f.Add("r", "g", "EUR", "", int64(0), int64(253402300800), int64(0), 0, 1, "", 0, int64(0), uint8(0))
	f.Add("r", "g", "EUR", "", int64(0), int64(0), int64(0), 0, 1, "n", 0, int64(0), uint8(255))
	f.Fuzz(func(t *testing.T, id, guest, currency, contact string, price, unix, nanos int64, offset, quantity int, night string,
		available int, version int64, shape uint8) {
		at := time.Unix(unix, nanos).In(time.FixedZone("z", offset))
		w := WithInventory{Reservation: fuzzReservation(id, guest, currency, contact, price, at, quantity, false)}
		// shape: 255 no inventory, 0 nil nights, else that many (mod 8)
		// nights of the fuzzed values.
		if shape != 255 {
			w.Inventory = &InventoryChange{HotelID: guest, RoomTypeID: strings.ToUpper(night)}
			for i := range int(shape % 8) {
				w.Inventory.Nights = append(w.Inventory.Nights, NightCount{Night: night, Available: available - i, Version: version + int64(i)})
			}
			if shape%8 == 0 && shape != 0 {
				w.Inventory.Nights = []NightCount{}
			}
		}
		want, err := json.Marshal(w)
		got, ok := w.AppendJSON(nil)
		if ok && (err != nil || string(got) != string(want)) {
			t.Fatalf("by hand %s (ok), json.Marshal %s (%v)", got, want, err)
		}
		if !ok && err == nil && plainTimes(at, offset) {
			t.Fatalf("a plain hold's payload did not take the hand way: %s", want)
		}
	})
}

// A fresh hold's answer and payload take the hand way — so the fuzzers
// compare something — and a reservation the hand way does not write
// (released nights) is left to encoding/json.
func TestAppendJSONTakesAFreshHold(t *testing.T) {
	in, _ := ParseDate("2027-03-01")
	now := time.Date(2026, 12, 1, 18, 0, 0, 123456000, time.UTC)
	r := Reservation{ID: "5b0f6f2e-3c1d-4d6e-9f70-8a9b0c1d2e3f", HotelID: "h", RoomTypeID: "rt", GuestID: "g-1", CheckIn: in,
		CheckOut: in.AddDays(3), Quantity: 1, Status: StatusHeld, HoldExpiresAt: now.Add(10 * time.Minute), TotalPriceCents: 38700,
		Currency: "EUR", ContactEmail: "a@example.com", Version: 1, CreatedAt: now, UpdatedAt: now}
	w := WithInventory{Reservation: r, Inventory: &InventoryChange{HotelID: "h", RoomTypeID: "rt",
		Nights: []NightCount{{Night: "2027-03-01", Available: 4, Version: 9}, {Night: "2027-03-02", Available: 0, Version: 10}}}}
	for _, v := range []interface {
		AppendJSON([]byte) ([]byte, bool)
	}{r, w, WithInventory{Reservation: r}} {
		want, _ := json.Marshal(v)
		if got, ok := v.AppendJSON([]byte("x")); !ok || string(got) != "x"+string(want) {
			t.Fatalf("by hand %s (ok %v), json.Marshal %s", got, ok, want)
		}
	}
	released := in.AddDays(1)
	r.ReleasedFrom = &released
	if _, ok := (WithInventory{Reservation: r}).AppendJSON(nil); ok {
		t.Fatal("released nights taken the hand way")
	}
}
