package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/rediscache"
)

// Slot lists are served from the regional cache, and a clinic write drops
// them at once: the next read shows the held slot.
func TestCachedSlotsReflectHold(t *testing.T) {
	t.Parallel()
	env, clinicID, read := startCachedSlots(t)
	if c, _ := read(); c != "miss" {
		t.Fatalf("first read X-Cache %q, want miss", c)
	}
	c, slots := read()
	if c != "hit" {
		t.Fatalf("second read X-Cache %q, want hit", c)
	}
	slotID := slots[0].(map[string]any)["slot_id"].(string)
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments", Token: env.Admin(),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g", "slot_id": slotID}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	c, slots = read()
	if c != "miss" || slots[0].(map[string]any)["status"] != "held" {
		t.Fatalf("after the hold: X-Cache %q, first slot %v; want a miss showing it held", c, slots[0])
	}
}

// A refusal that changed no slot keeps the cached slot lists: a 409
// slot_taken and a 422 are answered without dropping them (the next read
// is still a hit, and still right); a cancel, which frees the slot, drops
// them at once.
func TestCachedSlotsKeptByRefusals(t *testing.T) {
	t.Parallel()
	env, clinicID, readAll := startCachedSlots(t)
	read := func() (string, map[string]any) {
		t.Helper()
		c, slots := readAll()
		return c, slots[0].(map[string]any)
	}
	holdSlot := func(guest, slotID string) bookingtest.Response {
		return env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments", Token: env.Admin(),
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": guest, "slot_id": slotID}})
	}
	_, first := read()
	slotID := first["slot_id"].(string)
	won := holdSlot("g1", slotID)
	if won.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", won.Status, won.Body)
	}
	if c, s := read(); c != "miss" || s["status"] != "held" {
		t.Fatalf("after the hold: X-Cache %q, slot %v; want a miss showing it held", c, s)
	}
	// Twice each: the first 409 is the transaction's, the next may be the
	// read's (ADR 0011); neither changed the slot.
	for i := range 2 {
		if r := holdSlot(fmt.Sprintf("g%d", i+2), slotID); r.Status != http.StatusConflict || r.JSON()["code"] != "slot_taken" {
			t.Fatalf("second hold: %d %s, want 409 slot_taken", r.Status, r.Body)
		}
		if c, s := read(); c != "hit" || s["status"] != "held" {
			t.Errorf("after a 409 slot_taken: X-Cache %q, slot %v; want a hit showing it held", c, s)
		}
	}
	if r := holdSlot("g9", "not-a-slot"); r.Status/100 != 4 || r.Status == http.StatusConflict {
		t.Fatalf("hold of no slot: %d %s, want a 4xx refusal", r.Status, r.Body)
	}
	if c, _ := read(); c != "hit" {
		t.Errorf("after a refused request: X-Cache %q, want hit", c)
	}
	apptID := won.JSON()["appointment_id"].(string)
	if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments/" + apptID + "/cancel",
		Token: env.Admin(), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	if c, s := read(); c != "miss" || s["status"] != "open" {
		t.Fatalf("after the cancel: X-Cache %q, slot %v; want a miss showing it open", c, s)
	}
}

// startCachedSlots starts a booking server with the clinic routes behind a
// regional cache, with one clinic whose one doctor has a day of 30-minute
// slots materialized, and returns a read of that day's slots: its X-Cache
// header and the slots.
func startCachedSlots(t *testing.T) (*bookingtest.Env, string, func() (string, []any)) {
	t.Helper()
	var clinics *postgres.ClinicStore
	env, _, _ := startCached(t, rediscache.Options{TTL: time.Minute}, bookingtest.Options{Configure: func(cfg *httpapi.Config, s *postgres.Store) {
		clinics = postgres.NewClinicStore(s, 5*time.Minute)
		cfg.Clinics = clinics
	}})
	ce := &clinicEnv{Env: env, Clinics: clinics}
	clinicID := ce.seedClinic("Europe/Berlin")
	doctorID := ce.seedDoctor(clinicID, 30, true, allWeek("09:00", "10:00"))
	ce.materialize(clinicID, bookingtest.Date(3), bookingtest.Date(4))
	path := "/v1/clinics/" + clinicID + "/doctors/" + doctorID + "/slots?date=" + bookingtest.Date(3)
	return env, clinicID, func() (string, []any) {
		t.Helper()
		r := env.Do(bookingtest.Request{Method: "GET", Path: path})
		if r.Status != http.StatusOK {
			t.Fatalf("slots: %d %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Cache"), r.JSON()["slots"].([]any)
	}
}
