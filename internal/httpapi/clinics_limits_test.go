package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
)

// raceAppointments has one guest ask for one slot of each doctor at once
// and counts the outcomes as "status code[ limit=max]".
func raceAppointments(t *testing.T, ce *clinicEnv, clinicID, guest string, slots []string) map[string]int {
	t.Helper()
	var bodies []map[string]any
	for _, slot := range slots {
		bodies = append(bodies, map[string]any{"slot_id": slot})
	}
	return raceClinicHolds(t, ce, clinicID, guest, bodies)
}

// raceClinicHolds has one guest send the holds of bodies at once and counts the
// outcomes as raceAppointments does.
func raceClinicHolds(t *testing.T, ce *clinicEnv, clinicID, guest string, bodies []map[string]any) map[string]int {
	t.Helper()
	var (
		mu      sync.Mutex
		outcome = map[string]int{}
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for _, body := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := ce.hold(context.Background(), clinicID, guest, body)
			key := "transport error"
			if err == nil {
				key = fmt.Sprintf("%d %s", r.Status, r.Code())
				if r.Code() == "limit_exceeded" {
					key += fmt.Sprintf(" %v=%v", r.JSON()["limit"], r.JSON()["max"])
				}
			}
			mu.Lock()
			outcome[key]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return outcome
}

// doctorSlots seeds n doctors of the clinic and returns one open slot of each
// (distinct doctors, so the one-per-doctor-per-day rule never interferes).
func doctorSlots(ce *clinicEnv, clinicID string, n int, prepay bool) []string {
	var slots []string
	for range n {
		d := ce.seedDoctor(clinicID, 30, prepay, allWeek("09:00", "10:00"))
		ce.materialize(clinicID, bookingtest.Date(5), bookingtest.Date(6))
		slots = append(slots, ce.slots(clinicID, d, bookingtest.Date(5))[0].ID)
	}
	return slots
}

// One patient asks for 16 prepaid slots at once with a limit of 3 live
// holds: exactly 3 are held, the rest are 409 limit_exceeded, and the
// database shows 3 held appointments and 13 slots still open.
func TestClinicGuestHoldLimitRace(t *testing.T) {
	t.Parallel()
	ce := startClinicsWith(t, time.Minute, bookingtest.Options{GuestLimits: berth.GuestLimits{Holds: 3, Quantity: 50}})
	clinicID := ce.seedClinic("Europe/Berlin")
	slots := doctorSlots(ce, clinicID, 16, true)
	outcome := raceAppointments(t, ce, clinicID, "hoarder", slots)
	if outcome["201 "] != 3 || outcome["409 limit_exceeded holds_per_guest=3"] != len(slots)-3 {
		t.Fatalf("outcomes = %v, want 3 × 201 and %d × 409 limit_exceeded holds_per_guest=3", outcome, len(slots)-3)
	}
	if n := ce.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND guest_id = 'hoarder' AND status = 'held'`, clinicID); n != 3 {
		t.Fatalf("%d held appointments in the database, want 3", n)
	}
	// A hold of one slot takes it in the round trip of the guest's checks
	// too (ADR 0011, 2026-12-06): the take of a refused hold rolls back.
	if n := ce.queryInt(`SELECT count(*) FROM slots WHERE clinic_id = $1 AND status <> 'open'`, clinicID); n != 3 {
		t.Fatalf("%d slots taken, want 3: a refused hold's take must roll back", n)
	}
	ce.checkSlotInvariant(clinicID)
	// A lapsed hold no longer counts (lazy expiry, database time).
	for _, table := range []string{"appointments", "slots"} {
		col := map[string]string{"appointments": "guest_id", "slots": "held_by"}[table]
		if _, err := dbtest.SQL(ce.DB).Exec(context.Background(), `UPDATE `+table+` SET hold_expires_at = now() - INTERVAL '1 minute'
			WHERE clinic_id = $1 AND `+col+` = 'hoarder'`, clinicID); err != nil {
			t.Fatal(err)
		}
	}
	r, err := ce.hold(context.Background(), clinicID, "hoarder", map[string]any{"slot_id": slots[15]})
	if err != nil || r.Status != http.StatusCreated {
		// slots[15] may be one of the three held: its lapsed hold is taken over.
		t.Fatalf("hold after the holds lapsed: %v %d %s", err, r.Status, r.Body)
	}
}

// The same race by window, each hold asking for any slot of one doctor's
// hour. A window hold's take travels with the guest's checks (ADR 0011,
// 2026-12-02 evening): a hold the limit refuses rolls its take back, so
// exactly 3 slots end held, each by its appointment, and every other slot
// is open.
func TestClinicGuestHoldLimitRaceByWindow(t *testing.T) {
	t.Parallel()
	ce := startClinicsWith(t, time.Minute, bookingtest.Options{GuestLimits: berth.GuestLimits{Holds: 3, Quantity: 50}})
	clinicID := ce.seedClinic("Europe/Berlin")
	var bodies []map[string]any
	for range 16 {
		d := ce.seedDoctor(clinicID, 30, true, allWeek("09:00", "10:00"))
		ce.materialize(clinicID, bookingtest.Date(5), bookingtest.Date(6))
		ss := ce.slots(clinicID, d, bookingtest.Date(5))
		bodies = append(bodies, map[string]any{"doctor_id": d, "window_start": ss[0].StartsAt, "window_end": ss[len(ss)-1].EndsAt})
	}
	outcome := raceClinicHolds(t, ce, clinicID, "hoarder", bodies)
	if outcome["201 "] != 3 || outcome["409 limit_exceeded holds_per_guest=3"] != len(bodies)-3 {
		t.Fatalf("outcomes = %v, want 3 × 201 and %d × 409 limit_exceeded holds_per_guest=3", outcome, len(bodies)-3)
	}
	if n := ce.queryInt(`SELECT count(*) FROM slots WHERE clinic_id = $1 AND status <> 'open'`, clinicID); n != 3 {
		t.Fatalf("%d slots taken, want 3: a refused hold's take must roll back", n)
	}
	if n := ce.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND guest_id = 'hoarder' AND status = 'held'`, clinicID); n != 3 {
		t.Fatalf("%d held appointments in the database, want 3", n)
	}
	ce.checkSlotInvariant(clinicID)
}

// Without prepayment an appointment is confirmed at once and is no hold, but
// the quantity cap still bounds the guest's live appointments in the clinic.
func TestClinicGuestQuantityCapRace(t *testing.T) {
	t.Parallel()
	ce := startClinicsWith(t, time.Minute, bookingtest.Options{GuestLimits: berth.GuestLimits{Holds: 1, Quantity: 4}})
	clinicID := ce.seedClinic("Europe/Berlin")
	slots := doctorSlots(ce, clinicID, 12, false)
	outcome := raceAppointments(t, ce, clinicID, "regular", slots)
	if outcome["201 "] != 4 || outcome["409 limit_exceeded quantity_per_guest=4"] != len(slots)-4 {
		t.Fatalf("outcomes = %v, want 4 × 201 and %d × 409 limit_exceeded quantity_per_guest=4", outcome, len(slots)-4)
	}
	if n := ce.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND guest_id = 'regular' AND status = 'confirmed'`, clinicID); n != 4 {
		t.Fatalf("%d confirmed appointments in the database, want 4", n)
	}
	ce.checkSlotInvariant(clinicID)
}

// A guest who has the doctor that day already is refused a second slot of
// that day — a refusal kept with its key, so its transaction commits —
// and the slot asked for stays open: the take, which travels with the
// guest's checks, takes nothing when the day rule refuses (ADR 0011,
// 2026-12-06). Another guest then holds it.
func TestClinicDayRefusalTakesNoSlot(t *testing.T) {
	t.Parallel()
	for _, prepay := range []bool{true, false} {
		t.Run(map[bool]string{true: "held", false: "confirmed"}[prepay], func(t *testing.T) {
			t.Parallel()
			ce := startClinics(t, time.Minute)
			clinicID := ce.seedClinic("Europe/Berlin")
			d := ce.seedDoctor(clinicID, 30, prepay, allWeek("09:00", "11:00"))
			ce.materialize(clinicID, bookingtest.Date(5), bookingtest.Date(6))
			slots := ce.slots(clinicID, d, bookingtest.Date(5))
			hold := func(guest, key, slot string) bookingtest.Response {
				t.Helper()
				return ce.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments",
					Token: ce.guest(guest), IdemKey: key, Body: map[string]any{"guest_id": guest, "slot_id": slot}})
			}
			if r := hold("busy", bookingtest.NewKey(), slots[0].ID); r.Status != http.StatusCreated {
				t.Fatalf("first hold: %d %s", r.Status, r.Body)
			}
			key := bookingtest.NewKey()
			for attempt := range 2 { // the second is the key's replay
				r := hold("busy", key, slots[1].ID)
				if r.Status != http.StatusConflict || r.Code() != "invalid_state" || r.JSON()["reason"] != "one_per_doctor_per_day" {
					t.Fatalf("attempt %d, a second slot that day: %d %s, want 409 invalid_state one_per_doctor_per_day", attempt, r.Status, r.Body)
				}
			}
			if n := ce.queryInt(`SELECT count(*) FROM slots WHERE clinic_id = $1 AND slot_id = $2
				AND status = 'open' AND held_by IS NULL AND appointment_id IS NULL`, clinicID, slots[1].ID); n != 1 {
				t.Fatalf("the refused slot is not open: the day refusal committed a take")
			}
			if n := ce.queryInt(`SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND idem_key = $2 AND response_status = 409`,
				clinicID, key); n != 1 {
				t.Fatalf("the day refusal's answer is not kept with its key (%d rows)", n)
			}
			if r := hold("other", bookingtest.NewKey(), slots[1].ID); r.Status != http.StatusCreated {
				t.Fatalf("another guest's hold of the refused slot: %d %s", r.Status, r.Body)
			}
			ce.checkSlotInvariant(clinicID)
		})
	}
}
