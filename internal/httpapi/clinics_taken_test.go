package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
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

	type result struct {
		kind string
		r    bookingtest.Response
		err  error
	}
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make(chan result, 100)
	)
	send := func(kind, guest, key string, b map[string]any) {
		wg.Go(func() {
			<-start
			r, err := e.Try(context.Background(), bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: key, Body: b})
			results <- result{kind, r, err}
		})
	}
	for i := range 40 {
		guest := fmt.Sprintf("late-%02d", i)
		send("new", guest, bookingtest.NewKey(), body(guest, target))
	}
	for range 3 {
		send("retry", "winner", winKey, body("winner", target))
	}
	send("reused", "winner", winKey, body("winner", slots[6].ID))
	close(start)
	wg.Wait()
	close(results)
	for res := range results {
		switch {
		case res.err != nil:
			t.Errorf("%s: %v", res.kind, res.err)
		case res.kind == "new":
			alts, _ := res.r.JSON()["alternatives"].([]any)
			if res.r.Status != http.StatusConflict || res.r.Code() != "slot_taken" || len(alts) == 0 {
				t.Errorf("a hold of the taken slot: %d %s, want 409 slot_taken with alternatives", res.r.Status, res.r.Body)
			}
			for _, a := range alts {
				if a.(map[string]any)["slot_id"] == target {
					t.Errorf("the taken slot offered as its own alternative: %s", res.r.Body)
				}
			}
		case res.kind == "retry" && (res.r.Status != http.StatusCreated || res.r.JSON()["appointment_id"] != appt ||
			res.r.Header.Get("Idempotent-Replayed") != "true"):
			t.Errorf("a retry of the winning hold: %d %s, want its 201 (appointment %s) replayed", res.r.Status, res.r.Body, appt)
		case res.kind == "reused" && (res.r.Status != http.StatusUnprocessableEntity || res.r.Code() != "idempotency_key_reused"):
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
// Two retries of a loser's key and a herd on a second slot run alongside.
func TestHerdOnASlotWaitsForItsHoldInFlight(t *testing.T) {
	e, clinic, _, slots := startDayOf24(t)
	path := "/v1/clinics/" + clinic + "/appointments"
	type result struct {
		slot string
		r    bookingtest.Response
		err  error
	}
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make(chan result, 100)
	)
	send := func(guest, key, slot string) {
		wg.Go(func() {
			<-start
			r, err := e.Try(context.Background(), bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: key,
				Body: map[string]any{"guest_id": guest, "slot_id": slot}})
			results <- result{slot, r, err}
		})
	}
	targets := []string{slots[3].ID, slots[9].ID}
	retried := bookingtest.NewKey()
	for i := range 30 {
		send(fmt.Sprintf("herd-%02d", i), bookingtest.NewKey(), targets[0])
	}
	for i := range 10 {
		send(fmt.Sprintf("other-%02d", i), bookingtest.NewKey(), targets[1])
	}
	for range 3 {
		send("retrier", retried, targets[0])
	}
	close(start)
	wg.Wait()
	close(results)
	won := map[string]int{}
	for res := range results {
		switch {
		case res.err != nil:
			t.Errorf("%v", res.err)
		case res.r.Status == http.StatusCreated:
			won[res.slot]++
		case res.r.Status == http.StatusConflict && res.r.Code() == "slot_taken":
			alts, _ := res.r.JSON()["alternatives"].([]any)
			if len(alts) == 0 {
				t.Errorf("a 409 without alternatives: %s", res.r.Body)
			}
			for _, a := range alts {
				if a.(map[string]any)["slot_id"] == res.slot {
					t.Errorf("the taken slot offered as its own alternative: %s", res.r.Body)
				}
			}
		default:
			t.Errorf("a hold of a herd: %d %s, want 201 or 409 slot_taken", res.r.Status, res.r.Body)
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
