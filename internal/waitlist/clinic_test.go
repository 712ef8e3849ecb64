package waitlist

import (
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
)

func TestAllocateSlots(t *testing.T) {
	t.Parallel()
	day := day(t, "2027-05-10")
	at := func(h int) time.Time { return day.Time().Add(time.Duration(h) * time.Hour) }
	slot := func(id string, h int) FreeSlot { return FreeSlot{ID: id, StartsAt: at(h), Day: day} }
	whole := Window{From: at(0), To: at(24)}
	w := func(guest string, span Window) ClinicWaiter {
		return ClinicWaiter{EntryID: guest, GuestID: guest, Day: day, Span: span}
	}
	limits := berth.GuestLimits{Holds: 2, Quantity: 3}
	tests := []struct {
		name     string
		slots    []FreeSlot
		waiters  []ClinicWaiter
		patients map[string]PatientCount
		offer    []int
		slot     []int
		passed   []int
	}{
		{name: "one slot, first in line gets it",
			slots: []FreeSlot{slot("s9", 9)}, waiters: []ClinicWaiter{w("a", whole), w("b", whole)},
			offer: []int{0}, slot: []int{0}},
		{name: "earliest slot to the first waiter, the next to the second",
			slots: []FreeSlot{slot("s9", 9), slot("s10", 10)}, waiters: []ClinicWaiter{w("a", whole), w("b", whole), w("c", whole)},
			offer: []int{0, 1}, slot: []int{0, 1}},
		{name: "a window without a free slot is skipped, the waiter keeps their place",
			slots: []FreeSlot{slot("s9", 9)}, waiters: []ClinicWaiter{w("a", Window{From: at(14), To: at(16)}), w("b", whole)},
			offer: []int{1}, slot: []int{0}},
		{name: "a window gets the slot inside it, not the earliest",
			slots:   []FreeSlot{slot("s9", 9), slot("s15", 15)},
			waiters: []ClinicWaiter{w("a", Window{From: at(14), To: at(16)}), w("b", whole)},
			offer:   []int{0, 1}, slot: []int{1, 0}},
		{name: "the window's end is open",
			slots: []FreeSlot{slot("s16", 16)}, waiters: []ClinicWaiter{w("a", Window{From: at(14), To: at(16)})}},
		{name: "a patient busy with the doctor that day is passed over",
			slots: []FreeSlot{slot("s9", 9)}, waiters: []ClinicWaiter{w("a", whole), w("b", whole)},
			patients: map[string]PatientCount{"a": {Held: 0, Live: 1, Busy: map[string]bool{"2027-05-10": true}}},
			offer:    []int{1}, slot: []int{0}, passed: []int{0}},
		{name: "a patient at the hold limit is passed over",
			slots: []FreeSlot{slot("s9", 9)}, waiters: []ClinicWaiter{w("a", whole), w("b", whole)},
			patients: map[string]PatientCount{"a": {Held: 2, Live: 2}},
			offer:    []int{1}, slot: []int{0}, passed: []int{0}},
		{name: "nothing free", waiters: []ClinicWaiter{w("a", whole)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var before map[string]bool
			if p, ok := tc.patients["a"]; ok {
				before = map[string]bool{}
				for k, v := range p.Busy {
					before[k] = v
				}
			}
			d := AllocateSlots(tc.slots, tc.waiters, tc.patients, limits)
			if !slices.Equal(d.Offer, tc.offer) || !slices.Equal(d.Slot, tc.slot) || !slices.Equal(d.Passed, tc.passed) {
				t.Fatalf("offer %v slot %v passed %v, want %v %v %v", d.Offer, d.Slot, d.Passed, tc.offer, tc.slot, tc.passed)
			}
			if before != nil && len(tc.patients["a"].Busy) != len(before) {
				t.Fatal("AllocateSlots changed its input")
			}
		})
	}
	// Two entries of one patient on one day: the second is passed over
	// (one per doctor per day counts the first offer).
	d := AllocateSlots([]FreeSlot{slot("s9", 9), slot("s10", 10)}, []ClinicWaiter{w("a", whole), {EntryID: "a2", GuestID: "a", Day: day, Span: whole}}, nil, limits)
	if !slices.Equal(d.Offer, []int{0}) || !slices.Equal(d.Passed, []int{1}) {
		t.Fatalf("one patient twice on a day: %+v", d)
	}
}

func TestClinicFreed(t *testing.T) {
	t.Parallel()
	data := []byte(`{"appointment_id":"x","clinic_id":"c","doctor_id":"d","slot_id":"s"}`)
	for _, typ := range []string{appointment.EventCancelled, appointment.EventExpired, appointment.EventRescheduled} {
		f, ok, err := ClinicFreed(typ, data)
		if err != nil || !ok || f.ClinicID != "c" || f.DoctorID != "d" {
			t.Fatalf("%s: %+v %v %v", typ, f, ok, err)
		}
	}
	for _, typ := range []string{appointment.EventHeld, appointment.EventConfirmed, appointment.EventNoShow, "slot.blocked"} {
		if _, ok, err := ClinicFreed(typ, data); ok || err != nil {
			t.Fatalf("%s woke a line: %v %v", typ, ok, err)
		}
	}
	if _, _, err := ClinicFreed(appointment.EventCancelled, []byte(`{`)); err == nil {
		t.Fatal("bad data decoded")
	}
	if _, ok, _ := ClinicFreed(appointment.EventCancelled, []byte(`{"clinic_id":"c"}`)); ok {
		t.Fatal("an event without a doctor woke a line")
	}
}

func TestAfterClinicOffer(t *testing.T) {
	t.Parallel()
	for s, want := range map[appointment.Status]Status{
		appointment.StatusConfirmed: StatusBooked, appointment.StatusExpired: StatusLapsed, appointment.StatusCancelled: StatusDeclined,
	} {
		if got, ok := AfterClinicOffer(s); !ok || got != want {
			t.Errorf("%s: %s %v", s, got, ok)
		}
	}
	if _, ok := AfterClinicOffer(appointment.StatusHeld); ok {
		t.Error("a held offer settled its entry")
	}
}
