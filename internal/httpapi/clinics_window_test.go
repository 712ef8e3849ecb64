package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
)

// TestClinicWindowHerd is a clinic opening on one doctor-day: 24 slots,
// 120 patients released together, each asking for any slot of the first
// hour and, refused, for any slot of the day — on two doctors at once, one
// who confirms at once and one who wants prepayment (held). Every answer
// is 201 or 409 slot_taken; every slot is taken exactly once (120 patients
// ask for the whole day); the audit of `booking verify` is clean; and a
// replay of a window hold with its key answers the same slot, while a new
// key for the same guest is refused by the one-per-doctor-per-day rule.
func TestClinicWindowHerd(t *testing.T) {
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Madrid")
	doctors := []string{
		e.seedDoctor(clinic, 20, false, allWeek("07:00", "15:00")),
		e.seedDoctor(clinic, 20, true, allWeek("07:00", "15:00")),
	}
	day := bookingtest.Date(14)
	e.materialize(clinic, day, bookingtest.Date(15))
	type win struct{ from, to time.Time }
	firstHour, wholeDay := map[string]win{}, map[string]win{}
	for _, d := range doctors {
		slots := e.slots(clinic, d, day)
		if len(slots) != 24 {
			t.Fatalf("doctor %s has %d slots, want 24", d, len(slots))
		}
		firstHour[d] = win{slots[0].StartsAt, slots[0].StartsAt.Add(time.Hour)}
		wholeDay[d] = win{slots[0].StartsAt, slots[23].EndsAt}
	}
	body := func(d string, w win) map[string]any {
		return map[string]any{"doctor_id": d, "window_start": w.from.Format(time.RFC3339), "window_end": w.to.Format(time.RFC3339)}
	}
	type won struct {
		guest, key, slot string
		body             map[string]any
	}
	const patients = 120 // per doctor
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[string]int{}
		wins     = map[string][]won{} // by doctor
		start    = make(chan struct{})
	)
	for i := range 2 * patients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := doctors[i%2]
			guest := fmt.Sprintf("pat-%03d", i)
			<-start
			for _, w := range []win{firstHour[d], wholeDay[d]} {
				b, key := body(d, w), bookingtest.NewKey()
				b["guest_id"] = guest
				r, err := e.Try(context.Background(), bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments",
					Token: e.guest(guest), IdemKey: key, Body: b})
				mu.Lock()
				if err != nil {
					outcomes["transport: "+err.Error()]++
					mu.Unlock()
					return
				}
				outcomes[fmt.Sprintf("%d %s", r.Status, r.Code())]++
				if r.Status == http.StatusCreated {
					wins[d] = append(wins[d], won{guest, key, r.JSON()["slot_id"].(string), b})
				}
				mu.Unlock()
				if r.Status != http.StatusConflict || r.Code() != "slot_taken" {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	for k := range outcomes {
		if k != "201 " && k != "409 slot_taken" {
			t.Errorf("unexpected outcome %q: %v", k, outcomes)
		}
	}
	for _, d := range doctors {
		seen := map[string]string{}
		for _, w := range wins[d] {
			if other, dup := seen[w.slot]; dup {
				t.Errorf("slot %s answered 201 to %s and %s", w.slot, other, w.guest)
			}
			seen[w.slot] = w.guest
		}
		if len(seen) != 24 {
			t.Errorf("doctor %s: %d slots taken, want all 24 (outcomes %v)", d, len(seen), outcomes)
		}
	}
	if got := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND status IN ('held', 'confirmed')`, clinic); got != 48 {
		t.Errorf("%d live appointments, want 48", got)
	}
	e.checkSlotInvariant(clinic)

	// A replay answers the first response: the same slot.
	for _, d := range doctors {
		w := wins[d][0]
		r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments",
			Token: e.guest(w.guest), IdemKey: w.key, Body: w.body})
		if r.Status != http.StatusCreated || r.JSON()["slot_id"] != w.slot || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay of %s's window hold: %d %s (replayed %q), want 201 with slot %s",
				w.guest, r.Status, r.Body, r.Header.Get("Idempotent-Replayed"), w.slot)
		}
		// The same request under a new key is a new hold: the guest
		// already has this doctor that day. (The day is full, so a full
		// window may answer first; either way nothing is taken.)
		r = e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments",
			Token: e.guest(w.guest), IdemKey: bookingtest.NewKey(), Body: w.body})
		if r.Status != http.StatusConflict {
			t.Errorf("second hold of %s: %d %s, want 409", w.guest, r.Status, r.Body)
		}
	}
	if got := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1`, clinic); got != 48 {
		t.Errorf("%d appointment rows after the replays, want 48", got)
	}
	e.checkSlotInvariant(clinic)
}

// TestClinicWindowOnePerDayWithRoom: the window hold keeps the rule of one
// appointment per doctor per day when the window still has room — the
// refusal comes from the rule, not from a full window — and a replay of a
// refused window hold answers the same refusal.
func TestClinicWindowOnePerDayWithRoom(t *testing.T) {
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Madrid")
	doctor := e.seedDoctor(clinic, 20, false, allWeek("07:00", "15:00"))
	day := bookingtest.Date(14)
	e.materialize(clinic, day, bookingtest.Date(15))
	slots := e.slots(clinic, doctor, day)
	b := map[string]any{"guest_id": "ana", "doctor_id": doctor,
		"window_start": slots[0].StartsAt.Format(time.RFC3339), "window_end": slots[len(slots)-1].EndsAt.Format(time.RFC3339)}
	req := func(key string) bookingtest.Response {
		return e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments", Token: e.guest("ana"), IdemKey: key, Body: b})
	}
	if r := req(bookingtest.NewKey()); r.Status != http.StatusCreated || r.JSON()["slot_id"] != slots[0].ID {
		t.Fatalf("first window hold: %d %s, want 201 on the first slot", r.Status, r.Body)
	}
	key := bookingtest.NewKey()
	first := req(key)
	if first.Status != http.StatusConflict || first.Code() != "slot_taken" {
		t.Fatalf("second window hold the same day: %d %s, want 409 slot_taken (no slot left for this guest)", first.Status, first.Body)
	}
	if again := req(key); again.Status != first.Status || string(again.Body) != string(first.Body) {
		t.Fatalf("replay of a refused window hold: %d %s, want %d %s", again.Status, again.Body, first.Status, first.Body)
	}
	if got := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1`, clinic); got != 1 {
		t.Fatalf("%d appointments, want 1", got)
	}
	e.checkSlotInvariant(clinic)
}
