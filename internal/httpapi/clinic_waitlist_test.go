package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/postgres"
)

// deliverClinic is deliver to the clinic waitlist consumer's handler.
func deliverClinic(t *testing.T, e *clinicEnv, msgs []natsbus.Message) {
	t.Helper()
	deliverTo(t, natsbus.ClinicWaitlistHandler(e.Clinics, slog.New(slog.NewTextHandler(io.Discard, nil))), msgs)
}

// clinicOfferRow is an entry of a clinic waitlist as the database has it,
// with its offer's appointment and that appointment's slot.
type clinicOfferRow struct {
	entry, guest, status, appt, apptStatus, slot, slotStatus, slotAppt string
	seq                                                                int64
	starts                                                             time.Time
}

func clinicWaitlistRows(t *testing.T, e *clinicEnv, clinicID string) []clinicOfferRow {
	t.Helper()
	rows, err := dbtest.SQL(e.DB).Query(context.Background(), `SELECT w.entry_id::TEXT, w.guest_id, w.status,
			COALESCE(w.appointment_id::TEXT, ''), COALESCE(a.status, ''), COALESCE(a.slot_id::TEXT, ''), COALESCE(s.status, ''),
			COALESCE(s.appointment_id::TEXT, ''), w.seq, COALESCE(a.starts_at, 'epoch'::TIMESTAMPTZ)
		FROM clinic_waitlist_entries w
		LEFT JOIN appointments a ON a.clinic_id = w.clinic_id AND a.appointment_id = w.appointment_id
		LEFT JOIN slots s ON s.clinic_id = a.clinic_id AND s.slot_id = a.slot_id
		WHERE w.clinic_id = $1 ORDER BY w.seq`, clinicID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []clinicOfferRow
	for rows.Next() {
		var o clinicOfferRow
		if err := rows.Scan(&o.entry, &o.guest, &o.status, &o.appt, &o.apptStatus, &o.slot, &o.slotStatus, &o.slotAppt, &o.seq, &o.starts); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// joinClinic puts guest in the doctor's line for day (whole day when from
// is zero, else the window [from, to)).
func (e *clinicEnv) joinClinic(clinicID, doctorID, guest, day string, from, to time.Time) bookingtest.Response {
	body := map[string]any{"guest_id": guest, "doctor_id": doctorID, "date": day}
	if !from.IsZero() {
		body["window"] = map[string]any{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339)}
	}
	return e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/waitlist", Token: e.guest(guest),
		IdemKey: bookingtest.NewKey(), Body: body})
}

func dayAt(day string, hh, mm int) time.Time {
	d, err := time.Parse("2006-01-02", day)
	if err != nil {
		panic(err)
	}
	return d.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute)
}

// A doctor's 100 slots of a day are booked; 50 patients wait for that day
// (5 of them for an evening window with no slot in it). The 100 bookings
// are cancelled at once while 70 other patients race for the freed slots
// with window holds of their own (trying again while refused), and the
// consumer serves the line as the cancels commit, every event delivered
// twice at once, then all again (a replay). Afterwards, from the database:
// the offered entries are exactly the first entries whose span has a slot
// (the evening waiters are skipped and keep their place), each offer is one
// held appointment on its own slot (no slot offered twice), slots left free
// mean nobody who could use them still waits, the replay changes nothing,
// and the audit of `booking verify` is clean — under both isolation levels.
func TestClinicWaitlistOffersUnderConcurrentCancels(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			e := startClinicsWith(t, 0, bookingtest.Options{DB: dbOptions(iso)})
			const slotsN, waiters, racers = 100, 50, 70
			clinic := e.seedClinic("UTC")
			doctor := e.seedDoctor(clinic, 5, false, allWeek("08:00", "16:20"))
			day := bookingtest.Date(10)
			e.materialize(clinic, day, bookingtest.Date(11))
			slots := e.slots(clinic, doctor, day)
			if len(slots) != slotsN {
				t.Fatalf("%d slots, want %d", len(slots), slotsN)
			}
			appts := make([]string, slotsN)
			for i, s := range slots {
				r, err := e.hold(context.Background(), clinic, fmt.Sprintf("holder-%d", i), map[string]any{"slot_id": s.ID})
				if err != nil || r.Status != http.StatusCreated {
					t.Fatalf("hold %d: %v %d %s", i, err, r.Status, r.Body)
				}
				appts[i] = r.JSON()["appointment_id"].(string)
			}
			evening := func(i int) bool { return i%10 == 9 }
			for i := range waiters {
				var from, to time.Time
				if evening(i) {
					from, to = dayAt(day, 20, 0), dayAt(day, 21, 0)
				} else if i%3 == 0 {
					from, to = dayAt(day, 7, 0), dayAt(day, 17, 0)
				}
				if r := e.joinClinic(clinic, doctor, fmt.Sprintf("waiter-%02d", i), day, from, to); r.Status != http.StatusCreated {
					t.Fatalf("join %d: %d %s", i, r.Status, r.Body)
				}
			}
			relayed(t, e.Env) // the holds' and joins' events: nothing frees

			start := make(chan struct{})
			var wg sync.WaitGroup
			cancelled := make([]int, slotsN)
			for i, id := range appts {
				tok := e.guest(fmt.Sprintf("holder-%d", i))
				wg.Go(func() {
					<-start
					r, err := e.Try(context.Background(), bookingtest.Request{Method: "POST",
						Path: "/v1/clinics/" + clinic + "/appointments/" + id + "/cancel", Token: tok, IdemKey: bookingtest.NewKey()})
					if err == nil {
						cancelled[i] = r.Status
					}
				})
			}
			racerStatus := make([]int, racers)
			for i := range racers {
				g := fmt.Sprintf("racer-%d", i)
				wg.Go(func() {
					<-start
					for range 20 {
						r, err := e.hold(context.Background(), clinic, g, map[string]any{"doctor_id": doctor,
							"window_start": dayAt(day, 0, 0).Format(time.RFC3339), "window_end": dayAt(day, 23, 0).Format(time.RFC3339)})
						if err != nil {
							return
						}
						if racerStatus[i] = r.Status; r.Status != http.StatusConflict {
							return
						}
						time.Sleep(time.Duration(5+i%10) * time.Millisecond)
					}
				})
			}
			done := make(chan struct{})
			var consumed []natsbus.Message
			var cw sync.WaitGroup
			cw.Go(func() {
				for {
					select {
					case <-done:
						msgs := relayed(t, e.Env)
						deliverClinic(t, e, msgs)
						consumed = append(consumed, msgs...)
						return
					default:
					}
					msgs := relayed(t, e.Env)
					deliverClinic(t, e, msgs)
					consumed = append(consumed, msgs...)
					time.Sleep(5 * time.Millisecond)
				}
			})
			close(start)
			wg.Wait()
			close(done)
			cw.Wait()
			for i, s := range cancelled {
				if s != http.StatusOK {
					t.Fatalf("cancel %d: %d", i, s)
				}
			}
			raced := 0
			for _, s := range racerStatus {
				switch s {
				case http.StatusCreated:
					raced++
				case http.StatusConflict:
				default:
					t.Fatalf("a racing hold answered %d", s)
				}
			}
			deliverClinic(t, e, relayed(t, e.Env))

			line := clinicWaitlistRows(t, e, clinic)
			if len(line) != waiters {
				t.Fatalf("%d entries, want %d", len(line), waiters)
			}
			offered, matching := 0, 0
			seenSlot := map[string]bool{}
			for i, o := range line {
				if evening(i) {
					if o.status != "waiting" {
						t.Fatalf("evening entry %d is %s: no slot lies in its window", i, o.status)
					}
					continue
				}
				switch o.status {
				case "offered":
					if o.apptStatus != "held" || o.slotStatus != "held" || o.slotAppt != o.appt || seenSlot[o.slot] {
						t.Fatalf("entry %d: offered appointment %s (%s) on slot %s (%s for %s), slot seen before: %v",
							i, o.appt, o.apptStatus, o.slot, o.slotStatus, o.slotAppt, seenSlot[o.slot])
					}
					seenSlot[o.slot] = true
					if offered != matching {
						t.Fatalf("entry %d (%s) was offered while an earlier entry that a slot would serve still waits", i, o.guest)
					}
					offered++
				case "waiting":
				default:
					t.Fatalf("entry %d is %s", i, o.status)
				}
				matching++
			}
			if offered+raced > slotsN {
				t.Fatalf("%d offers and %d racing holds for %d slots", offered, raced, slotsN)
			}
			if free := slotsN - offered - raced; free > 0 && offered < matching {
				t.Fatalf("%d slots are free and %d waiters who could use them still wait", free, matching-offered)
			}
			if offered == 0 {
				t.Fatal("no waiter was offered anything")
			}
			t.Logf("%d offers, %d racing holds won, %d events consumed twice", offered, raced, len(consumed))
			e.AssertSlots(clinic)

			// A replay of every event makes nothing new.
			deliverClinic(t, e, consumed)
			deliverClinic(t, e, relayed(t, e.Env))
			again := clinicWaitlistRows(t, e, clinic)
			for i := range line {
				if again[i] != line[i] {
					t.Fatalf("the replay changed entry %d: %+v → %+v", i, line[i], again[i])
				}
			}
			if n := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND waitlist_entry_id IS NOT NULL`, clinic); n != offered {
				t.Fatalf("%d offer appointments for %d offered entries", n, offered)
			}
			e.AssertSlots(clinic)
		})
	}
}

// A waiter whose window holds no freed slot is skipped and keeps their
// place; the next one who fits gets the offer, sees it on their entry, and
// cannot leave; unconfirmed, the offer lapses (the expiry job) and passes to
// the next waiter, who confirms it (a doctor without prepayment: no payment
// needed) — the entry is booked. A slot freed in the first waiter's window
// then goes to them.
func TestClinicWaitlistSkipsWindowAndLapsesToNext(t *testing.T) {
	t.Parallel()
	e := startClinics(t, 0)
	e.Clinics.SetOfferTTL(time.Second)
	clinic := e.seedClinic("UTC")
	doctor := e.seedDoctor(clinic, 30, false, allWeek("08:00", "12:00"))
	day := bookingtest.Date(9)
	e.materialize(clinic, day, bookingtest.Date(10))
	slots := e.slots(clinic, doctor, day)
	appts := make([]string, len(slots))
	for i, s := range slots {
		r, err := e.hold(context.Background(), clinic, fmt.Sprintf("h%d", i), map[string]any{"slot_id": s.ID})
		if err != nil || r.Status != http.StatusCreated {
			t.Fatalf("hold %d: %v %d %s", i, err, r.Status, r.Body)
		}
		appts[i] = r.JSON()["appointment_id"].(string)
	}
	late := slots[len(slots)-1]
	var entries []string
	for _, j := range []struct {
		guest    string
		from, to time.Time
	}{{"a", late.StartsAt, late.EndsAt}, {"b", time.Time{}, time.Time{}}, {"c", time.Time{}, time.Time{}}} {
		r := e.joinClinic(clinic, doctor, j.guest, day, j.from, j.to)
		if r.Status != http.StatusCreated {
			t.Fatalf("join %s: %d %s", j.guest, r.Status, r.Body)
		}
		entries = append(entries, r.JSON()["entry_id"].(string))
	}
	entry := func(i int) map[string]any {
		g := []string{"a", "b", "c"}[i]
		r := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinic + "/waitlist/" + entries[i], Token: e.guest(g)})
		if r.Status != http.StatusOK {
			t.Fatalf("entry %s: %d %s", g, r.Status, r.Body)
		}
		return r.JSON()
	}
	if a := entry(0); a["position"] != float64(1) || a["window"] == nil {
		t.Fatalf("a: %v", a)
	}
	cancel := func(i int) {
		r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + appts[i] + "/cancel",
			Token: e.guest(fmt.Sprintf("h%d", i)), IdemKey: bookingtest.NewKey()})
		if r.Status != http.StatusOK {
			t.Fatalf("cancel %d: %d %s", i, r.Status, r.Body)
		}
		deliverClinic(t, e, relayed(t, e.Env))
	}
	cancel(0)
	if a := entry(0); a["status"] != "waiting" || a["position"] != float64(1) {
		t.Fatalf("a, whose window the freed slot is not in: %v", a)
	}
	b := entry(1)
	offer, _ := b["offer"].(map[string]any)
	if b["status"] != "offered" || offer == nil || offer["slot_id"] != slots[0].ID || offer["appointment_status"] != "held" {
		t.Fatalf("b after the cancel: %v", b)
	}
	if c := entry(2); c["status"] != "waiting" || c["position"] != float64(2) {
		t.Fatalf("c: %v", c)
	}
	if r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/waitlist/" + entries[1] + "/leave",
		Token: e.guest("b"), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusConflict || r.Code() != "invalid_state" {
		t.Fatalf("an offered entry left: %d %s", r.Status, r.Body)
	}
	ap := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinic + "/appointments/" + offer["appointment_id"].(string), Token: e.guest("b")})
	if ap.JSON()["waitlist_entry_id"] != entries[1] || ap.JSON()["status"] != "held" {
		t.Fatalf("the offered appointment: %s", ap.Body)
	}
	e.AssertSlots(clinic)

	// Nobody confirms: the offer lapses and passes on.
	time.Sleep(1500 * time.Millisecond)
	n, err := e.Clinics.ExpireClinicOffers(context.Background(), 100)
	if err != nil || n != 1 {
		t.Fatalf("expire offers: %d %v", n, err)
	}
	deliverClinic(t, e, relayed(t, e.Env))
	if b := entry(1); b["status"] != "lapsed" {
		t.Fatalf("b after the lapse: %v", b)
	}
	c := entry(2)
	offer, _ = c["offer"].(map[string]any)
	if c["status"] != "offered" || offer == nil || offer["slot_id"] != slots[0].ID {
		t.Fatalf("c after b's offer lapsed: %v", c)
	}
	r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + offer["appointment_id"].(string) + "/confirm",
		Token: e.guest("c"), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "none"}})
	if r.Status != http.StatusOK {
		t.Fatalf("c confirms the offer: %d %s", r.Status, r.Body)
	}
	if c := entry(2); c["status"] != "booked" {
		t.Fatalf("c after confirming: %v", c)
	}
	if a := entry(0); a["status"] != "waiting" || a["position"] != float64(1) {
		t.Fatalf("a still waits first: %v", a)
	}
	cancel(len(slots) - 1)
	if a := entry(0); a["status"] != "offered" {
		t.Fatalf("a after a slot in the window freed: %v", a)
	}
	e.AssertSlots(clinic)
}

// Patients leave while the slots they wait for free up and the consumer
// serves the line: a leave answered 200 left the line before any offer (the
// entry is left, no appointment made for it); one answered 409 found the
// entry offered (it holds its appointment). The audit is clean.
func TestClinicWaitlistLeaveRacesOffers(t *testing.T) {
	t.Parallel()
	e := startClinics(t, 0)
	const n = 20
	clinic := e.seedClinic("UTC")
	doctor := e.seedDoctor(clinic, 10, false, allWeek("08:00", "11:20"))
	day := bookingtest.Date(8)
	e.materialize(clinic, day, bookingtest.Date(9))
	slots := e.slots(clinic, doctor, day)
	if len(slots) != n {
		t.Fatalf("%d slots", len(slots))
	}
	appts := make([]string, n)
	for i, s := range slots {
		r, err := e.hold(context.Background(), clinic, fmt.Sprintf("h%d", i), map[string]any{"slot_id": s.ID})
		if err != nil || r.Status != http.StatusCreated {
			t.Fatalf("hold %d: %v %d %s", i, err, r.Status, r.Body)
		}
		appts[i] = r.JSON()["appointment_id"].(string)
	}
	entries := make([]string, n)
	for i := range n {
		r := e.joinClinic(clinic, doctor, fmt.Sprintf("w%d", i), day, time.Time{}, time.Time{})
		if r.Status != http.StatusCreated {
			t.Fatalf("join %d: %d %s", i, r.Status, r.Body)
		}
		entries[i] = r.JSON()["entry_id"].(string)
	}
	relayed(t, e.Env)
	start := make(chan struct{})
	var wg sync.WaitGroup
	leaves := make([]int, n)
	for i := range n {
		wg.Go(func() {
			<-start
			r, err := e.Try(context.Background(), bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + appts[i] + "/cancel",
				Token: e.guest(fmt.Sprintf("h%d", i)), IdemKey: bookingtest.NewKey()})
			if err != nil || r.Status != http.StatusOK {
				t.Errorf("cancel %d: %v %d", i, err, r.Status)
			}
		})
		wg.Go(func() {
			<-start
			// Spread over the cancels and the offers: early leaves find
			// their entry waiting, late ones may find it offered.
			time.Sleep(time.Duration(i*40) * time.Millisecond)
			r, err := e.Try(context.Background(), bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/waitlist/" + entries[i] + "/leave",
				Token: e.guest(fmt.Sprintf("w%d", i)), IdemKey: bookingtest.NewKey()})
			if err == nil {
				leaves[i] = r.Status
			}
		})
	}
	done := make(chan struct{})
	var cw sync.WaitGroup
	cw.Go(func() {
		for {
			deliverClinic(t, e, relayed(t, e.Env))
			select {
			case <-done:
				deliverClinic(t, e, relayed(t, e.Env))
				return
			default:
				time.Sleep(2 * time.Millisecond)
			}
		}
	})
	close(start)
	wg.Wait()
	close(done)
	cw.Wait()
	left, offered := 0, 0
	for i, o := range clinicWaitlistRows(t, e, clinic) {
		switch leaves[i] {
		case http.StatusOK:
			if o.status != "left" || o.appt != "" {
				t.Fatalf("entry %d: leave answered 200 but it is %s with appointment %q", i, o.status, o.appt)
			}
			left++
		case http.StatusConflict:
			if o.status != "offered" || o.apptStatus != "held" {
				t.Fatalf("entry %d: leave answered 409 but it is %s (%s)", i, o.status, o.apptStatus)
			}
			offered++
		default:
			t.Fatalf("leave %d answered %d", i, leaves[i])
		}
	}
	t.Logf("%d left, %d offered first", left, offered)
	e.AssertSlots(clinic)
}

// Bad input changes nothing and is answered with the contract's codes.
func TestClinicWaitlistInput(t *testing.T) {
	t.Parallel()
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Madrid")
	doctor := e.seedDoctor(clinic, 30, false, allWeek("08:00", "08:30")) // one slot a day
	other := e.seedClinic("UTC")
	day := bookingtest.Date(5)
	e.materialize(clinic, bookingtest.Date(1), bookingtest.Date(20))
	base := "/v1/clinics/" + clinic + "/waitlist"
	post := func(guest string, body map[string]any) bookingtest.Response {
		return e.Do(bookingtest.Request{Method: "POST", Path: base, Token: e.guest(guest), IdemKey: bookingtest.NewKey(), Body: body})
	}
	// The day's one slot is open: hold it instead of waiting.
	r := post("p", map[string]any{"guest_id": "p", "doctor_id": doctor, "date": day})
	if r.Status != http.StatusConflict || r.Code() != "invalid_state" || r.JSON()["reason"] != "slots_open" {
		t.Fatalf("join with a slot open: %d %s", r.Status, r.Body)
	}
	// Book the slots of days 2..16 (by someone else), and day 5's by p.
	for n := 2; n <= 16; n++ {
		d := bookingtest.Date(n)
		s := e.slots(clinic, doctor, d)
		g := fmt.Sprintf("owner-%d", n)
		if d == day {
			g = "p"
		}
		if hr, err := e.hold(context.Background(), clinic, g, map[string]any{"slot_id": s[0].ID}); err != nil || hr.Status != http.StatusCreated {
			t.Fatalf("hold day %d: %v %d %s", n, err, hr.Status, hr.Body)
		}
	}
	madrid, _ := time.LoadLocation("Europe/Madrid")
	d6, _ := time.ParseInLocation("2006-01-02", bookingtest.Date(6), madrid)
	tests := []struct {
		name, guest string
		token       string
		body        map[string]any
		status      int
		code        string
	}{
		{"unknown doctor", "q", "", map[string]any{"guest_id": "q", "doctor_id": "00000000-0000-0000-0000-000000000001", "date": bookingtest.Date(6)}, 404, "not_found"},
		{"bad doctor id", "q", "", map[string]any{"guest_id": "q", "doctor_id": "x", "date": bookingtest.Date(6)}, 404, "not_found"},
		{"no date", "q", "", map[string]any{"guest_id": "q", "doctor_id": doctor}, 400, "invalid_request"},
		{"bad date", "q", "", map[string]any{"guest_id": "q", "doctor_id": doctor, "date": "6 May"}, 400, "invalid_request"},
		{"past day", "q", "", map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(-2)}, 400, "invalid_request"},
		{"window outside the day", "q", "", map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(6),
			"window": map[string]any{"from": d6.Add(23 * time.Hour).Format(time.RFC3339), "to": d6.Add(25 * time.Hour).Format(time.RFC3339)}}, 400, "invalid_request"},
		{"window backwards", "q", "", map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(6),
			"window": map[string]any{"from": d6.Add(9 * time.Hour).Format(time.RFC3339), "to": d6.Add(8 * time.Hour).Format(time.RFC3339)}}, 400, "invalid_request"},
		{"unknown field", "q", "", map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(6), "room_type_id": "x"}, 400, "invalid_request"},
		{"for another patient", "q", "", map[string]any{"guest_id": "someone", "doctor_id": doctor, "date": bookingtest.Date(6)}, 403, "forbidden"},
		{"staff of another clinic", "q", e.Token("desk", "staff", other), map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(6)}, 403, "forbidden"},
		{"already booked with the doctor that day", "p", "", map[string]any{"guest_id": "p", "doctor_id": doctor, "date": day}, 409, "invalid_state"},
	}
	for _, tc := range tests {
		tok := tc.token
		if tok == "" {
			tok = e.guest(tc.guest)
		}
		r := e.Do(bookingtest.Request{Method: "POST", Path: base, Token: tok, IdemKey: bookingtest.NewKey(), Body: tc.body})
		if r.Status != tc.status || r.Code() != tc.code || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.code)
		}
	}
	if r := e.Do(bookingtest.Request{Method: "POST", Path: base, Token: e.guest("q"),
		Body: map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(6)}}); r.Status != http.StatusBadRequest {
		t.Errorf("no Idempotency-Key: %d %s", r.Status, r.Body)
	}
	if n := e.queryInt(`SELECT count(*) FROM clinic_waitlist_entries WHERE clinic_id = $1`, clinic); n != 0 {
		t.Fatalf("bad input wrote %d entries", n)
	}

	// q waits on 10 days; the 11th is over the limit; the same day twice is
	// "already waiting". A replay of a join answers the same entry.
	key := bookingtest.NewKey()
	var first bookingtest.Response
	for n := 6; n <= 15; n++ {
		req := bookingtest.Request{Method: "POST", Path: base, Token: e.guest("q"), IdemKey: bookingtest.NewKey(),
			Body: map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(n)}}
		if n == 6 {
			req.IdemKey = key
		}
		r := e.Do(req)
		if r.Status != http.StatusCreated {
			t.Fatalf("join day %d: %d %s", n, r.Status, r.Body)
		}
		if n == 6 {
			first = r
		}
	}
	replay := e.Do(bookingtest.Request{Method: "POST", Path: base, Token: e.guest("q"), IdemKey: key,
		Body: map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(6)}})
	if replay.Status != http.StatusCreated || replay.JSON()["entry_id"] != first.JSON()["entry_id"] {
		t.Fatalf("replayed join: %d %s", replay.Status, replay.Body)
	}
	if r := post("q", map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(16)}); r.Status != http.StatusConflict ||
		r.Code() != "limit_exceeded" || r.JSON()["limit"] != "waiting_per_guest" {
		t.Fatalf("11th entry: %d %s", r.Status, r.Body)
	}
	if r := post("q", map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(7)}); r.Status != http.StatusConflict ||
		r.Code() != "invalid_state" || r.JSON()["reason"] != "already_waiting" {
		t.Fatalf("same day twice: %d %s", r.Status, r.Body)
	}
	entry := first.JSON()["entry_id"].(string)
	// Only q (or the clinic's staff, an admin) sees and leaves q's entry.
	if r := e.Do(bookingtest.Request{Method: "GET", Path: base + "/" + entry, Token: e.guest("intruder")}); r.Status != http.StatusForbidden {
		t.Fatalf("another patient read the entry: %d %s", r.Status, r.Body)
	}
	if r := e.Do(bookingtest.Request{Method: "POST", Path: base + "/" + entry + "/leave", Token: e.guest("intruder"), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusForbidden {
		t.Fatalf("another patient left the entry: %d %s", r.Status, r.Body)
	}
	if r := e.Do(bookingtest.Request{Method: "GET", Path: base + "?guest_id=intruder-2", Token: e.guest("intruder")}); r.Status != http.StatusForbidden {
		t.Fatalf("another patient listed: %d %s", r.Status, r.Body)
	}
	if r := e.Do(bookingtest.Request{Method: "GET", Path: base + "/" + entry, Token: e.Token("desk", "staff", clinic)}); r.Status != http.StatusOK ||
		r.JSON()["position"] != float64(1) {
		t.Fatalf("the clinic's staff reads the entry: %d %s", r.Status, r.Body)
	}
	lk := bookingtest.NewKey()
	for range 2 {
		r := e.Do(bookingtest.Request{Method: "POST", Path: base + "/" + entry + "/leave", Token: e.guest("q"), IdemKey: lk})
		if r.Status != http.StatusOK || r.JSON()["status"] != "left" {
			t.Fatalf("leave: %d %s", r.Status, r.Body)
		}
	}
	r = e.Do(bookingtest.Request{Method: "GET", Path: base + "?guest_id=q&doctor_id=" + doctor, Token: e.guest("q")})
	if r.Status != http.StatusOK || len(r.JSON()["entries"].([]any)) != 10 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if r := post("q", map[string]any{"guest_id": "q", "doctor_id": doctor, "date": bookingtest.Date(16)}); r.Status != http.StatusCreated {
		t.Fatalf("after leaving one, a new day: %d %s", r.Status, r.Body)
	}
}

// booking verify's clinic waitlist checks find what they are for: an offer
// whose appointment disagrees with its entry, a held offer whose entry no
// longer names it, and an entry offered a slot while an earlier waiter whose
// span holds it still waits.
func TestVerifyFindsPlantedClinicWaitlistViolations(t *testing.T) {
	t.Parallel()
	e := startClinics(t, 0)
	clinic := e.seedClinic("UTC")
	doctor := e.seedDoctor(clinic, 30, false, allWeek("08:00", "09:00"))
	day := bookingtest.Date(9)
	e.materialize(clinic, day, bookingtest.Date(10))
	slots := e.slots(clinic, doctor, day)
	var appts []string
	for i, s := range slots {
		r, err := e.hold(context.Background(), clinic, fmt.Sprintf("h%d", i), map[string]any{"slot_id": s.ID})
		if err != nil || r.Status != http.StatusCreated {
			t.Fatalf("hold %d: %v %d %s", i, err, r.Status, r.Body)
		}
		appts = append(appts, r.JSON()["appointment_id"].(string))
	}
	// a waits for the last slot's half hour only; b for the whole day.
	if r := e.joinClinic(clinic, doctor, "a", day, slots[1].StartsAt, slots[1].EndsAt); r.Status != http.StatusCreated {
		t.Fatalf("join a: %d %s", r.Status, r.Body)
	}
	if r := e.joinClinic(clinic, doctor, "b", day, time.Time{}, time.Time{}); r.Status != http.StatusCreated {
		t.Fatalf("join b: %d %s", r.Status, r.Body)
	}
	if r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + appts[0] + "/cancel",
		Token: e.guest("h0"), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	deliverClinic(t, e, relayed(t, e.Env))
	e.AssertSlots(clinic) // clean so far: b got the first slot, a keeps waiting
	count := func() map[string]int {
		v, err := postgresVerify(e, clinic)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	sql := dbtest.SQL(e.DB)
	ctx := context.Background()
	// a's window widened to the whole day: b's offer jumped a waiter.
	if _, err := sql.Exec(ctx, `UPDATE clinic_waitlist_entries SET window_start = window_start - INTERVAL '8 hours', window_end = window_end + INTERVAL '8 hours'
		WHERE clinic_id = $1 AND guest_id = 'a'`, clinic); err != nil {
		t.Fatal(err)
	}
	// b's entry says its offer starts elsewhere than its appointment.
	if _, err := sql.Exec(ctx, `UPDATE clinic_waitlist_entries SET offered_starts = offered_starts + INTERVAL '1 hour'
		WHERE clinic_id = $1 AND guest_id = 'b'`, clinic); err != nil {
		t.Fatal(err)
	}
	got := count()
	if got["clinic_waitlist_fifo"] != 1 || got["clinic_waitlist_offer_holds"] != 1 {
		t.Fatalf("planted one FIFO and one offer violation, verify found %v", got)
	}
	// The held offer's entry no longer names it.
	if _, err := sql.Exec(ctx, `UPDATE clinic_waitlist_entries SET status = 'declined' WHERE clinic_id = $1 AND guest_id = 'b'`, clinic); err != nil {
		t.Fatal(err)
	}
	if got := count(); got["clinic_waitlist_offer_holds"] != 1 {
		t.Fatalf("a held offer without its offered entry: verify found %v", got)
	}
}

// postgresVerify runs booking verify's clinic checks on one clinic and
// counts the violations by check.
func postgresVerify(e *clinicEnv, clinicID string) (map[string]int, error) {
	res, err := postgres.Verify(context.Background(), e.DB, postgres.VerifyOptions{Partitions: []string{clinicID}})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, c := range res {
		out[c.Name] = len(c.Violations)
	}
	return out, nil
}
