package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestClinicRescheduleStorm: pairs of guests move their appointments back
// and forth between their pair's three slots in parallel for 30 s (3 s with
// -short). Moves cross each other in every direction, so two transactions
// often want the same two slots in opposite roles. No client may see a
// deadlock or any 5xx; afterwards no slot has two live appointments and
// every appointment points at exactly one slot that points back at it.
func TestClinicRescheduleStorm(t *testing.T) {
	dur := 30 * time.Second
	if testing.Short() {
		dur = 3 * time.Second
	}
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Berlin")
	doctor := e.seedDoctor(clinic, 10, false, allWeek("08:00", "12:00"))
	day := bookingtest.Date(14)
	e.materialize(clinic, day, bookingtest.Date(15))
	slots := e.slots(clinic, doctor, day)
	const pairs = 8
	if len(slots) < pairs*3 {
		t.Fatalf("only %d slots", len(slots))
	}
	type guest struct {
		id, appt, cur string
		mine          []string // the pair's three slots
	}
	var guests []*guest
	for p := range pairs {
		mine := []string{slots[3*p].ID, slots[3*p+1].ID, slots[3*p+2].ID}
		for g := range 2 {
			id := fmt.Sprintf("pair%d-%c", p, 'a'+g)
			r, _ := e.hold(context.Background(), clinic, id, map[string]any{"slot_id": mine[g]})
			if r.Status != http.StatusCreated || r.JSON()["status"] != "confirmed" {
				t.Fatalf("seed %s: %d %s", id, r.Status, r.Body)
			}
			guests = append(guests, &guest{id: id, appt: r.JSON()["appointment_id"].(string), cur: mine[g], mine: mine})
		}
	}
	// The lock order (slots ascending, then appointments) must make a
	// deadlock impossible, not merely retried away: count what the
	// transaction helper retries.
	var retries sync.Map
	e.DB.OnRetry(func(err error) {
		var pgErr *pgconn.PgError
		code := "other"
		if errors.As(err, &pgErr) {
			code = pgErr.Code
		}
		n, _ := retries.LoadOrStore(code, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[string]int{}
		bad      []string
		stop     = time.Now().Add(dur)
	)
	for _, g := range guests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			token := e.guest(g.id)
			for time.Now().Before(stop) {
				// One of the two slots it is not on (the pair partner may sit there).
				to := g.mine[rand.IntN(3)]
				for to == g.cur {
					to = g.mine[rand.IntN(3)]
				}
				r, err := e.Try(context.Background(), bookingtest.Request{Method: "POST",
					Path:  "/v1/clinics/" + clinic + "/appointments/" + g.appt + "/reschedule",
					Token: token, IdemKey: bookingtest.NewKey(), Body: map[string]any{"slot_id": to}})
				mu.Lock()
				switch {
				case err != nil:
					bad = append(bad, err.Error())
				case r.Status == http.StatusOK && r.JSON()["slot_id"] == to:
					g.cur = to
					outcomes["200 "]++
				case r.Status == http.StatusConflict && r.Code() == "slot_taken":
					outcomes["409 slot_taken"]++
				default:
					bad = append(bad, fmt.Sprintf("%d %s", r.Status, r.Body))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("reschedule outcomes over %s: %v", dur, outcomes)
	retries.Range(func(k, v any) bool {
		t.Logf("retried %s: %d", k, v.(*atomic.Int64).Load())
		if k == "40P01" {
			t.Errorf("%d deadlocks were detected (and retried)", v.(*atomic.Int64).Load())
		}
		return true
	})
	if len(bad) > 0 {
		t.Fatalf("%d bad answers, first: %s", len(bad), bad[0])
	}
	if outcomes["200 "] == 0 || outcomes["409 slot_taken"] == 0 {
		t.Fatalf("the storm did not exercise both outcomes: %v", outcomes)
	}
	if n := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND status = 'confirmed'`, clinic); n != 2*pairs {
		t.Fatalf("%d confirmed appointments, want %d", n, 2*pairs)
	}
	if n := e.queryInt(`SELECT count(DISTINCT slot_id) FROM appointments WHERE clinic_id = $1 AND status = 'confirmed'`, clinic); n != 2*pairs {
		t.Fatalf("appointments share slots: %d distinct slots for %d appointments", n, 2*pairs)
	}
	if n := e.queryInt(`SELECT count(*) FROM slots WHERE clinic_id = $1 AND status = 'booked'`, clinic); n != 2*pairs {
		t.Fatalf("%d booked slots, want %d", n, 2*pairs)
	}
	e.checkSlotInvariant(clinic)
	// Every successful move wrote one rescheduled event with the next version.
	if n := e.queryInt(`SELECT count(*) FROM outbox WHERE partition_id = $1 AND event_type = 'appointment.rescheduled'`, clinic); n != outcomes["200 "] {
		t.Fatalf("%d rescheduled events for %d moves", n, outcomes["200 "])
	}
}

// TestClinicMaterializeDST materializes a clinic's slots over the DST
// transition days of Europe/Berlin and America/New_York through the API:
// no slot at a local time that does not exist, no duplicate in the repeated
// hour, and re-running creates nothing.
func TestClinicMaterializeDST(t *testing.T) {
	e := startClinics(t, 0)
	night := []window{{"weekday": 7, "start": "00:00", "end": "05:00"}}
	for _, tc := range []struct {
		zone, day string
		want      []string
	}{
		{"Europe/Berlin", "2027-03-28", []string{"00:00", "00:30", "01:00", "01:30", "03:00", "03:30", "04:00", "04:30"}},
		{"Europe/Berlin", "2027-10-31", []string{"00:00", "00:30", "01:00", "01:30", "02:00", "02:30", "03:00", "03:30", "04:00", "04:30"}},
		{"America/New_York", "2027-03-14", []string{"00:00", "00:30", "01:00", "01:30", "03:00", "03:30", "04:00", "04:30"}},
		{"America/New_York", "2027-11-07", []string{"00:00", "00:30", "01:00", "01:30", "02:00", "02:30", "03:00", "03:30", "04:00", "04:30"}},
	} {
		t.Run(tc.zone+"/"+tc.day, func(t *testing.T) {
			clinic := e.seedClinic(tc.zone)
			doctor := e.seedDoctor(clinic, 30, false, night)
			d, _ := time.Parse("2006-01-02", tc.day)
			from, to := d.AddDate(0, 0, -1).Format("2006-01-02"), d.AddDate(0, 0, 2).Format("2006-01-02")
			if n := e.materialize(clinic, from, to); n != len(tc.want) {
				t.Fatalf("created %d slots, want %d", n, len(tc.want))
			}
			if n := e.materialize(clinic, from, to); n != 0 {
				t.Fatalf("re-run created %d slots", n)
			}
			loc, _ := time.LoadLocation(tc.zone)
			list := e.slots(clinic, doctor, tc.day)
			var got []string
			seen := map[time.Time]bool{}
			for i, s := range list {
				got = append(got, s.StartsAt.In(loc).Format("15:04"))
				if seen[s.StartsAt] {
					t.Errorf("duplicate slot at %s", s.StartsAt)
				}
				seen[s.StartsAt] = true
				if s.EndsAt.Sub(s.StartsAt) != 30*time.Minute {
					t.Errorf("slot %s lasts %s", s.StartsAt, s.EndsAt.Sub(s.StartsAt))
				}
				if i > 0 && list[i-1].EndsAt.After(s.StartsAt) {
					t.Errorf("slot %s overlaps the one before", s.StartsAt)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("local starts %v, want %v", got, tc.want)
			}
			if n := e.queryInt(`SELECT count(*) FROM slots WHERE clinic_id = $1`, clinic); n != len(tc.want) {
				t.Fatalf("%d slot rows", n)
			}
		})
	}
}
