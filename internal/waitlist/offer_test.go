package waitlist

import (
	"slices"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
)

func day(t *testing.T, s string) reservation.Date {
	t.Helper()
	d, err := reservation.ParseDate(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAllocate(t *testing.T) {
	t.Parallel()
	stay := func(in, out string) reservation.Stay {
		return reservation.Stay{CheckIn: day(t, in), CheckOut: day(t, out)}
	}
	w := func(guest, in, out string) Waiter {
		return Waiter{EntryID: guest + in, GuestID: guest, Stay: stay(in, out), Quantity: 1}
	}
	limits := berth.GuestLimits{Holds: 2, Quantity: 50}
	tests := []struct {
		name       string
		free       map[string]int
		waiters    []Waiter
		guests     map[string]GuestCount
		offer      []int
		passedOver []int
	}{
		{name: "one room, first in line gets it",
			free:    map[string]int{"2027-05-10": 1, "2027-05-11": 1},
			waiters: []Waiter{w("a", "2027-05-10", "2027-05-12"), w("b", "2027-05-10", "2027-05-12")},
			offer:   []int{0}},
		{name: "two rooms, two in order",
			free:    map[string]int{"2027-05-10": 2},
			waiters: []Waiter{w("a", "2027-05-10", "2027-05-11"), w("b", "2027-05-10", "2027-05-11"), w("c", "2027-05-10", "2027-05-11")},
			offer:   []int{0, 1}},
		{name: "a stay that does not fit is skipped, a later one that fits is served",
			free:    map[string]int{"2027-05-10": 1},
			waiters: []Waiter{w("a", "2027-05-10", "2027-05-12"), w("b", "2027-05-10", "2027-05-11")},
			offer:   []int{1}},
		{name: "a missing night has nothing",
			free:    map[string]int{"2027-05-11": 3},
			waiters: []Waiter{w("a", "2027-05-10", "2027-05-12")}},
		{name: "a guest at the hold limit is passed over, the room goes on",
			free:       map[string]int{"2027-05-10": 1},
			waiters:    []Waiter{w("a", "2027-05-10", "2027-05-11"), w("b", "2027-05-10", "2027-05-11")},
			guests:     map[string]GuestCount{"a": {Holds: 2, Rooms: 2}},
			offer:      []int{1},
			passedOver: []int{0}},
		{name: "offers count toward the limit within one decision",
			free: map[string]int{"2027-05-10": 5},
			waiters: []Waiter{w("a", "2027-05-10", "2027-05-11"), {EntryID: "a2", GuestID: "a", Stay: stay("2027-05-10", "2027-05-11"), Quantity: 1},
				{EntryID: "a3", GuestID: "a", Stay: stay("2027-05-10", "2027-05-11"), Quantity: 1}, w("b", "2027-05-10", "2027-05-11")},
			guests:     map[string]GuestCount{"a": {Holds: 1, Rooms: 1}},
			offer:      []int{0, 3},
			passedOver: []int{1, 2}},
		{name: "nothing free, nobody", free: map[string]int{"2027-05-10": 0},
			waiters: []Waiter{w("a", "2027-05-10", "2027-05-11")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := map[string]int{}
			for k, v := range tc.free {
				before[k] = v
			}
			d := Allocate(tc.free, tc.waiters, tc.guests, limits)
			if !slices.Equal(d.Offer, tc.offer) || !slices.Equal(d.Passed, tc.passedOver) {
				t.Fatalf("offer %v passed %v, want %v and %v", d.Offer, d.Passed, tc.offer, tc.passedOver)
			}
			for k, v := range before {
				if tc.free[k] != v {
					t.Fatalf("Allocate changed its input: %s %d → %d", k, v, tc.free[k])
				}
			}
		})
	}
}

func TestFreed(t *testing.T) {
	t.Parallel()
	cancelled := `{"reservation_id":"r","inventory":{"hotel_id":"h","room_type_id":"rt","nights":[
		{"night":"2027-05-11","available":1,"version":3},{"night":"2027-05-10","available":2,"version":3},{"night":"2027-05-12","available":0,"version":3}]}}`
	f, ok, err := Freed(reservation.EventCancelled, []byte(cancelled))
	if err != nil || !ok {
		t.Fatalf("cancelled: ok %v err %v", ok, err)
	}
	if f.HotelID != "h" || f.RoomTypeID != "rt" || len(f.Nights) != 2 || f.Nights[0].String() != "2027-05-10" || f.Nights[1].String() != "2027-05-11" {
		t.Fatalf("cancelled: %+v", f)
	}
	inv := `{"hotel_id":"h","room_type_id":"rt","nights":[{"night":"2027-05-10","available":4,"version":9}]}`
	if f, ok, err := Freed(reservation.EventInventory, []byte(inv)); err != nil || !ok || len(f.Nights) != 1 {
		t.Fatalf("inventory.changed: %+v %v %v", f, ok, err)
	}
	joined := `{"entry_id":"e","hotel_id":"h","room_type_id":"rt","guest_id":"g","check_in":"2027-05-10","check_out":"2027-05-12","status":"waiting"}`
	if f, ok, err := Freed(EventJoined, []byte(joined)); err != nil || !ok || f.HotelID != "h" || f.RoomTypeID != "rt" || len(f.Nights) != 2 ||
		f.Nights[0].String() != "2027-05-10" {
		t.Fatalf("waitlist.joined: %+v %v %v", f, ok, err)
	}
	if _, _, err := Freed(EventJoined, []byte(`{"check_in":12}`)); err == nil {
		t.Fatal("a bad join decoded")
	}
	for name, c := range map[string]struct{ typ, data string }{
		"a hold takes":           {reservation.EventHeld, cancelled},
		"a confirmation takes":   {reservation.EventConfirmed, cancelled},
		"nothing left":           {reservation.EventExpired, `{"inventory":{"hotel_id":"h","room_type_id":"rt","nights":[{"night":"2027-05-10","available":0}]}}`},
		"no inventory":           {reservation.EventCancelled, `{"reservation_id":"r"}`},
		"another aggregate type": {"hotel.catalog", `{}`},
	} {
		if _, ok, err := Freed(c.typ, []byte(c.data)); ok || err != nil {
			t.Errorf("%s: ok %v err %v, want nothing", name, ok, err)
		}
	}
	if _, _, err := Freed(reservation.EventCancelled, []byte(`{"inventory":{"hotel_id":"h","room_type_id":"rt","nights":[{"night":"x","available":1}]}}`)); err == nil {
		t.Error("a bad night decoded")
	}
}

func TestAfterOffer(t *testing.T) {
	t.Parallel()
	for s, want := range map[reservation.Status]Status{
		reservation.StatusConfirmed: StatusBooked, reservation.StatusExpired: StatusLapsed, reservation.StatusCancelled: StatusDeclined,
	} {
		if got, ok := AfterOffer(s); !ok || got != want {
			t.Errorf("%s: %s %v, want %s", s, got, ok, want)
		}
	}
	if _, ok := AfterOffer(reservation.StatusHeld); ok {
		t.Error("a held offer settled its entry")
	}
}
