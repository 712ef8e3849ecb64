package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
)

// TestClinicConcurrentHoldsOneSlot: 50 guests race for one slot over HTTP.
// Exactly one wins; the rest get 409 slot_taken with alternatives, and not
// all the same ones (the herd is spread); the database shows one live
// appointment on the slot.
func TestClinicConcurrentHoldsOneSlot(t *testing.T) {
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Berlin")
	doctor := e.seedDoctor(clinic, 30, true, allWeek("08:00", "12:00"))
	day := bookingtest.Date(10)
	e.materialize(clinic, day, bookingtest.Date(11))
	slots := e.slots(clinic, doctor, day)
	if len(slots) != 8 {
		t.Fatalf("got %d slots, want 8", len(slots))
	}
	target := slots[3].ID

	const n = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		byCode  = map[int]int{}
		badAlts []string
		firsts  = map[any]int{} // first alternative offered → losers
		start   = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := e.hold(context.Background(), clinic, fmt.Sprintf("guest-%02d", i), map[string]any{"slot_id": target})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				byCode[-1]++
				return
			}
			byCode[r.Status]++
			if r.Status == http.StatusConflict {
				m := r.JSON()
				alts, _ := m["alternatives"].([]any)
				if m["code"] != "slot_taken" || len(alts) == 0 || len(alts) > 3 {
					badAlts = append(badAlts, string(r.Body))
					return
				}
				firsts[alts[0].(map[string]any)["slot_id"]]++
				for _, a := range alts {
					if a.(map[string]any)["slot_id"] == target {
						badAlts = append(badAlts, "alternative is the taken slot: "+string(r.Body))
					}
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if byCode[http.StatusCreated] != 1 || byCode[http.StatusConflict] != n-1 {
		t.Fatalf("statuses %v, want exactly one 201 and %d 409", byCode, n-1)
	}
	if len(badAlts) > 0 {
		t.Fatalf("bad slot_taken answers: %v", badAlts[:min(3, len(badAlts))])
	}
	if got := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND slot_id = $2 AND status IN ('held', 'confirmed')`,
		clinic, target); got != 1 {
		t.Fatalf("%d live appointments on the slot, want 1", got)
	}
	if got := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1`, clinic); got != 1 {
		t.Fatalf("%d appointment rows, want 1", got)
	}
	e.checkSlotInvariant(clinic)
	if len(firsts) < 2 {
		t.Errorf("all %d losers were offered the same first alternative: %v", n-1, firsts)
	}
	// The alternatives are near, nearest first: 7 slots are open, so each
	// comes from a bucket of two at equal distance from the taken slot 3.
	buckets := [][]string{{slots[2].ID, slots[4].ID}, {slots[1].ID, slots[5].ID}, {slots[0].ID, slots[6].ID}}
	for g := range 10 {
		r, _ := e.hold(context.Background(), clinic, fmt.Sprintf("late-guest-%d", g), map[string]any{"slot_id": target})
		var p struct {
			Alternatives []struct {
				SlotID string `json:"slot_id"`
			} `json:"alternatives"`
		}
		_ = json.Unmarshal(r.Body, &p)
		if len(p.Alternatives) != 3 {
			t.Fatalf("alternatives %s", r.Body)
		}
		for i, a := range p.Alternatives {
			if a.SlotID != buckets[i][0] && a.SlotID != buckets[i][1] {
				t.Errorf("alternative %d is %s, want one of %v (slots %d away): %s", i, a.SlotID, buckets[i], i+1, r.Body)
			}
		}
	}
}

// TestClinicAnySlotInWindow: 20 parallel "any slot in this window"
// requests with 20 open slots get 20 distinct slots and no failure.
func TestClinicAnySlotInWindow(t *testing.T) {
	e := startClinics(t, 0)
	clinic := e.seedClinic("America/New_York")
	doctor := e.seedDoctor(clinic, 15, true, allWeek("08:00", "13:00"))
	day := bookingtest.Date(12)
	e.materialize(clinic, day, bookingtest.Date(13))
	slots := e.slots(clinic, doctor, day)
	if len(slots) != 20 {
		t.Fatalf("got %d slots, want 20", len(slots))
	}
	body := func() map[string]any {
		return map[string]any{"doctor_id": doctor,
			"window_start": slots[0].StartsAt.Format(time.RFC3339), "window_end": slots[19].EndsAt.Format(time.RFC3339)}
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   = map[string]int{}
		fails []string
		start = make(chan struct{})
	)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := e.hold(context.Background(), clinic, fmt.Sprintf("w-guest-%02d", i), body())
			mu.Lock()
			defer mu.Unlock()
			if err != nil || r.Status != http.StatusCreated {
				fails = append(fails, fmt.Sprintf("%v %d %s", err, r.Status, r.Body))
				return
			}
			got[r.JSON()["slot_id"].(string)]++
		}()
	}
	close(start)
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%d failures, first: %s", len(fails), fails[0])
	}
	if len(got) != 20 {
		t.Fatalf("%d distinct slots, want 20: %v", len(got), got)
	}
	// The 21st finds nothing open in the window: 409 slot_taken.
	r, _ := e.hold(context.Background(), clinic, "w-guest-21", body())
	if r.Status != http.StatusConflict || r.Code() != "slot_taken" {
		t.Fatalf("21st: %d %s", r.Status, r.Body)
	}
	e.checkSlotInvariant(clinic)
}

// TestClinicOnePerDoctorPerDay: one guest fires parallel holds on different
// slots of one doctor on one day; exactly one wins.
func TestClinicOnePerDoctorPerDay(t *testing.T) {
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Berlin")
	doctor := e.seedDoctor(clinic, 30, true, allWeek("08:00", "12:00"))
	day, next := bookingtest.Date(9), bookingtest.Date(10)
	e.materialize(clinic, day, bookingtest.Date(11))
	slots := e.slots(clinic, doctor, day)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		byCode = map[string]int{}
		start  = make(chan struct{})
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			body := map[string]any{"slot_id": slots[i].ID}
			if i%2 == 1 { // half of them through the window search
				body = map[string]any{"doctor_id": doctor, "window_start": slots[0].StartsAt.Format(time.RFC3339),
					"window_end": slots[7].EndsAt.Format(time.RFC3339)}
			}
			r, err := e.hold(context.Background(), clinic, "greedy", body)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				byCode["transport"]++
				return
			}
			byCode[fmt.Sprintf("%d %s", r.Status, r.Code())]++
		}()
	}
	close(start)
	wg.Wait()
	if byCode["201 "] != 1 {
		t.Fatalf("outcomes %v, want exactly one 201", byCode)
	}
	for k := range byCode {
		if k != "201 " && k != "409 invalid_state" && k != "409 slot_taken" {
			t.Fatalf("unexpected outcome %q in %v", k, byCode)
		}
	}
	if n := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND guest_id = 'greedy' AND status IN ('held', 'confirmed')`, clinic); n != 1 {
		t.Fatalf("%d live appointments of the guest, want 1", n)
	}
	// Another day of the same doctor is fine.
	r, _ := e.hold(context.Background(), clinic, "greedy", map[string]any{"slot_id": e.slots(clinic, doctor, next)[0].ID})
	if r.Status != http.StatusCreated {
		t.Fatalf("next day: %d %s", r.Status, r.Body)
	}
	// Moving the next day's appointment onto the busy day breaks the limit too.
	mv := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + r.JSON()["appointment_id"].(string) + "/reschedule",
		Token: e.guest("greedy"), IdemKey: bookingtest.NewKey(), Body: map[string]any{"slot_id": slots[7].ID}})
	if mv.Status != http.StatusConflict || mv.Code() != "invalid_state" {
		t.Fatalf("reschedule onto the busy day: %d %s", mv.Status, mv.Body)
	}
	e.checkSlotInvariant(clinic)
}

// TestClinicLazyExpiry: with a short TTL and no sweeper, a lapsed hold
// shows open and is taken by someone else at once; the first holder's late
// confirm then gets 409 hold_expired and a refund_requested event. A late
// confirm on a slot nobody took still wins.
func TestClinicLazyExpiry(t *testing.T) {
	// The TTL must outlast the two holds and the first slot list even on a
	// loaded machine (at 1 s the hold lapsed before the list under load);
	// the test waits for the lapse by database time, so a longer TTL costs
	// only its own length.
	e := startClinics(t, 4*time.Second)
	clinic := e.seedClinic("Europe/Berlin")
	doctor := e.seedPricedDoctor(clinic, 30, 6000, "EUR")
	day := bookingtest.Date(8)
	e.materialize(clinic, day, bookingtest.Date(9))
	slots := e.slots(clinic, doctor, day)
	ctx := context.Background()

	rA, _ := e.hold(ctx, clinic, "alice", map[string]any{"slot_id": slots[0].ID})
	rLate, _ := e.hold(ctx, clinic, "lara", map[string]any{"slot_id": slots[1].ID})
	if rA.Status != http.StatusCreated || rLate.Status != http.StatusCreated {
		t.Fatalf("holds: %d %s / %d %s", rA.Status, rA.Body, rLate.Status, rLate.Body)
	}
	apptA, apptLate := rA.JSON()["appointment_id"].(string), rLate.JSON()["appointment_id"].(string)
	// Both pay (the provider reports their intents as succeeded), late.
	payA, payLate := e.PayHold(rA), e.PayHold(rLate)
	if rA.JSON()["status"] != "held" || rA.JSON()["hold_expires_at"] == nil {
		t.Fatalf("hold answer %s", rA.Body)
	}
	if s := e.slots(clinic, doctor, day)[0].Status; s != "held" {
		t.Fatalf("slot shows %s while held", s)
	}
	// Wait (by database time) until the hold lapsed: the list shows it open.
	deadline := time.Now().Add(30 * time.Second)
	for e.slots(clinic, doctor, day)[0].Status != "open" {
		if time.Now().After(deadline) {
			t.Fatal("the lapsed hold never showed as open")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// No sweeper runs in this server: Bob takes the lapsed slot at once.
	rB, _ := e.hold(ctx, clinic, "bob", map[string]any{"slot_id": slots[0].ID})
	if rB.Status != http.StatusCreated {
		t.Fatalf("bob: %d %s", rB.Status, rB.Body)
	}
	// Alice pays late: 409 hold_expired, and a refund is requested.
	rC := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + apptA + "/confirm",
		Token: e.guest("alice"), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": payA}})
	if rC.Status != http.StatusConflict || rC.Code() != "hold_expired" {
		t.Fatalf("late confirm: %d %s", rC.Status, rC.Body)
	}
	if n := e.queryInt(`SELECT count(*) FROM outbox WHERE partition_id = $1 AND aggregate_id = $2 AND event_type = 'refund_requested'
		AND payload->'appointment'->>'guest_id' = 'alice' AND payload->>'payment_ref' = $3
		AND payload->>'amount_cents' = '6000' AND payload->>'currency' = 'EUR'`, clinic, apptA, payA); n != 1 {
		t.Fatalf("%d refund_requested events, want 1", n)
	}
	got := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinic + "/appointments/" + apptA, Token: e.guest("alice")})
	if got.JSON()["status"] != "expired" {
		t.Fatalf("alice's appointment: %s", got.Body)
	}
	// Lara's hold lapsed too, but nobody took her slot: her late payment wins.
	rL := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + apptLate + "/confirm",
		Token: e.guest("lara"), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": payLate}})
	if rL.Status != http.StatusOK || rL.JSON()["status"] != "confirmed" {
		t.Fatalf("lara's late confirm: %d %s", rL.Status, rL.Body)
	}
	if s := e.slots(clinic, doctor, day)[1].Status; s != "booked" {
		t.Fatalf("lara's slot shows %s", s)
	}
	e.checkSlotInvariant(clinic)
	// The slot's audit trail tells the story, system expiry included.
	au := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinic + "/slots/" + slots[0].ID + "/audit", Token: e.Admin()})
	var trail struct {
		Events []struct {
			Actor, ActorRole, Channel, FromStatus, ToStatus string
		} `json:"events"`
	}
	_ = json.Unmarshal(au.Body, &trail)
	var steps []string
	for _, ev := range au.JSON()["events"].([]any) {
		m := ev.(map[string]any)
		steps = append(steps, fmt.Sprintf("%s:%s>%s", m["actor"], m["from_status"], m["to_status"]))
	}
	want := "[alice:open>held berth:held>open bob:open>held]"
	if fmt.Sprint(steps) != want {
		t.Fatalf("audit %v, want %s", steps, want)
	}
}

// TestClinicHoldConfirmCancelAndEvents walks the life cycle and checks the
// outbox: hold+confirm in one call without prepayment, cancel reopens the
// slot, replays change nothing, and every change has its versioned event.
func TestClinicHoldConfirmCancelAndEvents(t *testing.T) {
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Berlin")
	doctor := e.seedDoctor(clinic, 20, false, allWeek("09:00", "10:00"))
	day := bookingtest.Date(5)
	e.materialize(clinic, day, bookingtest.Date(6))
	slots := e.slots(clinic, doctor, day)
	key := bookingtest.NewKey()
	req := bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments", Token: e.guest("carol"),
		IdemKey: key, Body: map[string]any{"guest_id": "carol", "slot_id": slots[0].ID}}
	r := e.Do(req)
	if r.Status != http.StatusCreated || r.JSON()["status"] != "confirmed" || r.JSON()["channel"] != "app" {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	appt := r.JSON()["appointment_id"].(string)
	replay := e.Do(req)
	if replay.Status != http.StatusCreated || string(replay.Body) != string(r.Body) || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", replay.Status, replay.Body)
	}
	req.Body = map[string]any{"guest_id": "carol", "slot_id": slots[1].ID}
	if r := e.Do(req); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("key reuse: %d %s", r.Status, r.Body)
	}
	if s := e.slots(clinic, doctor, day)[0].Status; s != "booked" {
		t.Fatalf("slot %s, want booked", s)
	}
	// Another guest may not read or cancel it.
	if r := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinic + "/appointments/" + appt, Token: e.guest("mallory")}); r.Status != http.StatusForbidden {
		t.Fatalf("other guest read: %d", r.Status)
	}
	if r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + appt + "/cancel",
		Token: e.guest("mallory"), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusForbidden {
		t.Fatalf("other guest cancel: %d", r.Status)
	}
	// Reschedule to the next slot, then cancel.
	rr := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + appt + "/reschedule",
		Token: e.guest("carol"), IdemKey: bookingtest.NewKey(), Body: map[string]any{"slot_id": slots[2].ID}})
	if rr.Status != http.StatusOK || rr.JSON()["slot_id"] != slots[2].ID {
		t.Fatalf("reschedule: %d %s", rr.Status, rr.Body)
	}
	st := e.slots(clinic, doctor, day)
	if st[0].Status != "open" || st[2].Status != "booked" {
		t.Fatalf("after reschedule: %v", st)
	}
	rc := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + appt + "/cancel",
		Token: e.guest("carol"), IdemKey: bookingtest.NewKey()})
	if rc.Status != http.StatusOK || rc.JSON()["status"] != "cancelled" {
		t.Fatalf("cancel: %d %s", rc.Status, rc.Body)
	}
	if s := e.slots(clinic, doctor, day)[2].Status; s != "open" {
		t.Fatalf("slot after cancel %s", s)
	}
	again := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments/" + appt + "/cancel",
		Token: e.guest("carol"), IdemKey: bookingtest.NewKey()})
	if again.Status != http.StatusConflict || again.Code() != "invalid_state" {
		t.Fatalf("second cancel: %d %s", again.Status, again.Body)
	}
	rows, err := dbtest.SQL(e.DB).Query(context.Background(),
		`SELECT event_type, aggregate_version, payload->>'guest_id' FROM outbox WHERE partition_id = $1 AND aggregate_id = $2
		 ORDER BY aggregate_version`, clinic, appt)
	if err != nil {
		t.Fatal(err)
	}
	var evs []string
	for rows.Next() {
		var (
			typ, guest string
			v          int64
		)
		if err := rows.Scan(&typ, &v, &guest); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, fmt.Sprintf("%s@%d/%s", typ, v, guest))
	}
	want := "[appointment.confirmed@1/carol appointment.rescheduled@2/carol appointment.cancelled@3/carol]"
	if fmt.Sprint(evs) != want {
		t.Fatalf("events %v, want %s", evs, want)
	}
	e.checkSlotInvariant(clinic)
}

// TestClinicReceptionDesk: staff of the clinic book for any guest at the
// counter; staff of another clinic may not; guests may not book for others
// or claim the counter; the audit names the staff member and channel.
func TestClinicReceptionDesk(t *testing.T) {
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Berlin")
	other := e.seedClinic("Europe/Berlin")
	doctor := e.seedDoctor(clinic, 30, true, allWeek("08:00", "12:00"))
	day := bookingtest.Date(6)
	e.materialize(clinic, day, bookingtest.Date(7))
	slots := e.slots(clinic, doctor, day)
	staff := e.Token("desk-1", berth.RoleStaff, clinic)
	stranger := e.Token("desk-9", berth.RoleStaff, other)
	path := "/v1/clinics/" + clinic + "/appointments"
	for _, tc := range []struct {
		name, token string
		body        map[string]any
		status      int
	}{
		{"staff of another clinic", stranger, map[string]any{"guest_id": "dave", "slot_id": slots[0].ID, "channel": "counter"}, 403},
		{"guest for another guest", e.guest("eve"), map[string]any{"guest_id": "dave", "slot_id": slots[0].ID}, 403},
		{"guest at the counter", e.guest("dave"), map[string]any{"guest_id": "dave", "slot_id": slots[0].ID, "channel": "counter"}, 403},
		{"staff on the app", staff, map[string]any{"guest_id": "dave", "slot_id": slots[0].ID, "channel": "app"}, 400},
		{"staff at the counter", staff, map[string]any{"guest_id": "dave", "slot_id": slots[0].ID, "channel": "counter"}, 201},
	} {
		r := e.Do(bookingtest.Request{Method: "POST", Path: path, Token: tc.token, IdemKey: bookingtest.NewKey(), Body: tc.body})
		if r.Status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, r.Status, r.Body, tc.status)
		}
		if tc.status == 201 {
			m := r.JSON()
			if m["channel"] != "counter" || m["guest_id"] != "dave" {
				t.Fatalf("staff booking %s", r.Body)
			}
			// The desk confirms the payment for the guest too.
			c := e.Do(bookingtest.Request{Method: "POST", Path: path + "/" + m["appointment_id"].(string) + "/confirm", Token: staff,
				IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "cash-1"}})
			if c.Status != http.StatusOK {
				t.Fatalf("staff confirm: %d %s", c.Status, c.Body)
			}
		}
	}
	if r := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinic + "/slots/" + slots[0].ID + "/audit", Token: stranger}); r.Status != 403 {
		t.Fatalf("stranger audit: %d", r.Status)
	}
	if r := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinic + "/slots/" + slots[0].ID + "/audit", Token: e.guest("dave")}); r.Status != 403 {
		t.Fatalf("guest audit: %d", r.Status)
	}
	au := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinic + "/slots/" + slots[0].ID + "/audit", Token: staff})
	var trail struct {
		Events []struct {
			Actor      string `json:"actor"`
			ActorRole  string `json:"actor_role"`
			Channel    string `json:"channel"`
			FromStatus string `json:"from_status"`
			ToStatus   string `json:"to_status"`
			At         string `json:"at"`
		} `json:"events"`
	}
	if err := json.Unmarshal(au.Body, &trail); err != nil || len(trail.Events) != 2 {
		t.Fatalf("audit %d %s", au.Status, au.Body)
	}
	for i, want := range []string{"open>held", "held>booked"} {
		ev := trail.Events[i]
		if ev.Actor != "desk-1" || ev.ActorRole != "staff" || ev.Channel != "counter" || ev.FromStatus+">"+ev.ToStatus != want || ev.At == "" {
			t.Fatalf("audit event %d: %+v", i, ev)
		}
	}
	// Staff block a slot; it can no longer be held.
	b := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/slots/" + slots[5].ID + "/block", Token: staff})
	if b.Status != http.StatusOK || b.JSON()["status"] != "blocked" {
		t.Fatalf("block: %d %s", b.Status, b.Body)
	}
	if r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/slots/" + slots[5].ID + "/block", Token: e.guest("dave")}); r.Status != 403 {
		t.Fatalf("guest block: %d", r.Status)
	}
	r, _ := e.hold(context.Background(), clinic, "frank", map[string]any{"slot_id": slots[5].ID})
	if r.Status != http.StatusConflict || r.Code() != "slot_taken" {
		t.Fatalf("hold a blocked slot: %d %s", r.Status, r.Body)
	}
	if r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/slots/" + slots[0].ID + "/block", Token: staff}); r.Status != http.StatusConflict {
		t.Fatalf("block a booked slot: %d %s", r.Status, r.Body)
	}
	e.checkSlotInvariant(clinic)
}
