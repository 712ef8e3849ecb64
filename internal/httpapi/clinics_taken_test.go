package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
)

// TestTakenSlotAnsweredByARead: once a slot is taken, the next holds of it
// are refused by a read, without a transaction (nothing stored with their
// keys), each still with its own answer — alternatives that leave the slot
// out, a retry of the winning key its stored 201, the key reused for
// another slot 422 — and the slot freed by a cancel is taken at once by the
// next hold of it.
func TestTakenSlotAnsweredByARead(t *testing.T) {
	e, clinic, _, slots := startDayOf24(t)
	target := slots[5].ID
	path := "/v1/clinics/" + clinic + "/appointments"
	body := func(guest, slot string) map[string]any { return map[string]any{"guest_id": guest, "slot_id": slot} }
	keys := func() int { return e.queryInt(`SELECT count(*) FROM idempotency_keys WHERE partition_id = $1`, clinic) }

	winKey := bookingtest.NewKey()
	won := e.Do(bookingtest.Request{Method: "POST", Path: path, Token: e.guest("winner"), IdemKey: winKey, Body: body("winner", target)})
	if won.Status != http.StatusCreated {
		t.Fatalf("the first hold of the slot: %d %s", won.Status, won.Body)
	}
	appt := won.JSON()["appointment_id"].(string)
	stored := keys()

	h := &herd{}
	hold := func(guest, key string, b map[string]any) bookingtest.Request {
		return bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: key, Body: b}
	}
	for i := range 40 {
		guest := fmt.Sprintf("late-%02d", i)
		h.add("new", hold(guest, bookingtest.NewKey(), body(guest, target)))
	}
	for range 3 {
		h.add("retry", hold("winner", winKey, body("winner", target)))
	}
	h.add("reused", hold("winner", winKey, body("winner", slots[6].ID)))
	for _, res := range h.run(e) {
		switch {
		case res.err != nil:
			t.Errorf("%s: %v", res.tag, res.err)
		case res.tag == "new":
			checkSlotTaken(t, res.r, target)
		case res.tag == "retry" && (res.r.Status != http.StatusCreated || res.r.JSON()["appointment_id"] != appt ||
			res.r.Header.Get("Idempotent-Replayed") != "true"):
			t.Errorf("a retry of the winning hold: %d %s, want its 201 (appointment %s) replayed", res.r.Status, res.r.Body, appt)
		case res.tag == "reused" && (res.r.Status != http.StatusUnprocessableEntity || res.r.Code() != "idempotency_key_reused"):
			t.Errorf("the winner's key for another slot: %d %s, want 422 idempotency_key_reused", res.r.Status, res.r.Body)
		}
	}
	if got := keys(); got != stored {
		t.Errorf("%d keys stored by holds of the taken slot, want none: a read refuses them", got-stored)
	}

	// Freed by a cancel, the slot goes to the next hold of it at once.
	if c := e.Do(bookingtest.Request{Method: "POST", Path: path + "/" + appt + "/cancel", Token: e.guest("winner"),
		IdemKey: bookingtest.NewKey()}); c.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", c.Status, c.Body)
	}
	if r := e.Do(bookingtest.Request{Method: "POST", Path: path, Token: e.guest("next"), IdemKey: bookingtest.NewKey(),
		Body: body("next", target)}); r.Status != http.StatusCreated {
		t.Errorf("a hold of the slot right after its cancel: %d %s, want 201", r.Status, r.Body)
	}
	if got := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND slot_id = $2 AND status IN ('held', 'confirmed')`,
		clinic, target); got != 1 {
		t.Errorf("%d live appointments on the slot, want 1", got)
	}
	e.checkSlotInvariant(clinic)
}

// A herd on one open slot, all released together, goes to the database
// one hold at a time in this process (ADR 0011, 2026-12-02 later): the first
// takes the slot in its transaction, the others wait for it and are then
// refused by a read — exactly one 201, every other hold 409 slot_taken with
// alternatives that leave the slot out, and only the winner's key stored.
// Three holds with one key (a client's retries: when that key wins, the
// other two replay its 201) and a herd on a second slot run alongside.
func TestHerdOnASlotWaitsForItsHoldInFlight(t *testing.T) {
	e, clinic, _, slots := startDayOf24(t)
	path := "/v1/clinics/" + clinic + "/appointments"
	targets := []string{slots[3].ID, slots[9].ID}
	h := &herd{}
	hold := func(guest, key, slot string) {
		h.add(slot, bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: key,
			Body: map[string]any{"guest_id": guest, "slot_id": slot}})
	}
	retried := bookingtest.NewKey()
	for i := range 30 {
		hold(fmt.Sprintf("herd-%02d", i), bookingtest.NewKey(), targets[0])
	}
	for i := range 10 {
		hold(fmt.Sprintf("other-%02d", i), bookingtest.NewKey(), targets[1])
	}
	for range 3 {
		hold("retrier", retried, targets[0])
	}
	// A 201 is a win, or — for the retried key only, when it won — the
	// replay of that win.
	won := map[string]int{}
	for _, res := range h.run(e) {
		switch {
		case res.err != nil:
			t.Errorf("%v", res.err)
		case res.r.Status == http.StatusCreated && res.r.Header.Get("Idempotent-Replayed") == "true":
			if h.reqs[res.i].IdemKey != retried {
				t.Errorf("slot %s: a 201 replayed for a key sent once", res.tag)
			}
		case res.r.Status == http.StatusCreated:
			won[res.tag]++
		default:
			checkSlotTaken(t, res.r, res.tag)
		}
	}
	for _, slot := range targets {
		if won[slot] != 1 {
			t.Errorf("slot %s: %d holds won, want exactly 1", slot, won[slot])
		}
		if got := e.queryInt(`SELECT count(*) FROM appointments WHERE clinic_id = $1 AND slot_id = $2 AND status IN ('held', 'confirmed')`,
			clinic, slot); got != 1 {
			t.Errorf("slot %s: %d live appointments, want 1", slot, got)
		}
	}
	// Each slot's winner stored its key; the retried key at most its one
	// answer (it may have won); every refusal was a read's.
	if got := e.queryInt(`SELECT count(*) FROM idempotency_keys WHERE partition_id = $1`, clinic); got > 2+1 {
		t.Errorf("%d keys stored, want the 2 winners' (and the retried key's, had it won): the herds' refusals were transactions", got)
	}
	e.checkSlotInvariant(clinic)
}
