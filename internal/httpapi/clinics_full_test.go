package httpapi_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
)

// TestFullWindowAnsweredByARead: once a window is found full, the next window
// holds of it are refused by a read, without a transaction (nothing stored
// with their keys), each still with its own answer — a retry of a winning
// key its stored 201, the key reused for another request 422 — and a slot
// freed by a cancel is taken at once by the next hold, for every one of
// several cancels racing each other.
func TestFullWindowAnsweredByARead(t *testing.T) {
	e, clinic, doctor, slots := startDayOf24(t)
	body := func(guest string, end time.Time) map[string]any {
		return map[string]any{"guest_id": guest, "doctor_id": doctor,
			"window_start": slots[0].StartsAt.Format(time.RFC3339), "window_end": end.Format(time.RFC3339)}
	}
	wholeDay := slots[23].EndsAt
	path := "/v1/clinics/" + clinic + "/appointments"
	type won struct{ guest, key, appt, slot string }
	var wins []won
	for i := range 24 {
		guest, key := fmt.Sprintf("win-%02d", i), bookingtest.NewKey()
		r := e.Do(bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: key, Body: body(guest, wholeDay)})
		if r.Status != http.StatusCreated {
			t.Fatalf("hold %d: %d %s", i, r.Status, r.Body)
		}
		wins = append(wins, won{guest, key, r.JSON()["appointment_id"].(string), r.JSON()["slot_id"].(string)})
	}
	keys := func() int { return e.queryInt(`SELECT count(*) FROM idempotency_keys WHERE partition_id = $1`, clinic) }
	// The first refusal is the transaction's (its key stored); it marks
	// the window full.
	if r := e.Do(bookingtest.Request{Method: "POST", Path: path, Token: e.guest("late"), IdemKey: bookingtest.NewKey(),
		Body: body("late", wholeDay)}); r.Status != http.StatusConflict || r.Code() != "slot_taken" {
		t.Fatalf("a hold of the full day: %d %s", r.Status, r.Body)
	}
	stored := keys()

	h := &herd{}
	var who []won // who[i]: the winner a retry or a reuse names
	send := func(kind string, w won, guest, key string, b map[string]any) {
		h.add(kind, bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: key, Body: b})
		who = append(who, w)
	}
	for i := range 60 {
		guest := fmt.Sprintf("lose-%02d", i)
		send("new", won{}, guest, bookingtest.NewKey(), body(guest, wholeDay))
	}
	for _, w := range wins[:4] {
		send("retry", w, w.guest, w.key, body(w.guest, wholeDay))
		send("reused", w, w.guest, w.key, body(w.guest, wholeDay.Add(-time.Hour)))
	}
	for _, res := range h.run(e) {
		w := who[res.i]
		switch {
		case res.err != nil:
			t.Errorf("%s: %v", res.tag, res.err)
		case res.tag == "new" && (res.r.Status != http.StatusConflict || res.r.Code() != "slot_taken"):
			t.Errorf("a hold of the full day: %d %s, want 409 slot_taken", res.r.Status, res.r.Body)
		case res.tag == "retry" && (res.r.Status != http.StatusCreated || res.r.JSON()["slot_id"] != w.slot ||
			res.r.Header.Get("Idempotent-Replayed") != "true"):
			t.Errorf("a retry of %s's hold: %d %s, want its 201 with slot %s", w.guest, res.r.Status, res.r.Body, w.slot)
		case res.tag == "reused" && (res.r.Status != http.StatusUnprocessableEntity || res.r.Code() != "idempotency_key_reused"):
			t.Errorf("%s's key with another window: %d %s, want 422 idempotency_key_reused", w.guest, res.r.Status, res.r.Body)
		}
	}
	if got := keys(); got != stored {
		t.Errorf("%d keys stored by holds of the full window, want none: a read refuses them", got-stored)
	}

	// Cancels racing each other, each followed at once by a hold of the
	// day by a new patient: the freed slot is there for it every time.
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	holds := make(chan bookingtest.Response, 6)
	for i, w := range wins[4:10] {
		wg.Go(func() {
			<-start
			c := e.Do(bookingtest.Request{Method: "POST", Path: path + "/" + w.appt + "/cancel", Token: e.guest(w.guest), IdemKey: bookingtest.NewKey()})
			if c.Status != http.StatusOK {
				t.Errorf("cancel %s: %d %s", w.appt, c.Status, c.Body)
				return
			}
			guest := fmt.Sprintf("next-%02d", i)
			holds <- e.Do(bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: bookingtest.NewKey(), Body: body(guest, wholeDay)})
		})
	}
	close(start)
	wg.Wait()
	close(holds)
	for r := range holds {
		if r.Status != http.StatusCreated {
			t.Errorf("a hold right after a cancel: %d %s, want 201", r.Status, r.Body)
		}
	}
	if r := e.Do(bookingtest.Request{Method: "POST", Path: path, Token: e.guest("later"), IdemKey: bookingtest.NewKey(),
		Body: body("later", wholeDay)}); r.Status != http.StatusConflict {
		t.Errorf("full again, but a hold got %d %s", r.Status, r.Body)
	}
	if got := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND status IN ('held', 'confirmed')`, clinic); got != 24 {
		t.Errorf("%d live appointments, want 24", got)
	}
	e.checkSlotInvariant(clinic)
}
