package httpapi_test

import (
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
	read := func() (string, []any) {
		r := env.Do(bookingtest.Request{Method: "GET", Path: path})
		if r.Status != http.StatusOK {
			t.Fatalf("slots: %d %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Cache"), r.JSON()["slots"].([]any)
	}
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
