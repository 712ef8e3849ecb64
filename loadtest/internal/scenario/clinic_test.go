package scenario

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
)

// A small clinic opening against a real booking server on a fresh
// database, both patient models in one run: the window patients fill every
// slot (each doctor has more patients than slots), the shipped ones no
// more than there are, and the audit passes for both clinics.
func TestClinicOpeningEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnvWith(t, bookingtest.Options{Configure: func(cfg *httpapi.Config, st *postgres.Store) {
		cfg.Clinics = postgres.NewClinicStore(st, 0)
	}})
	r, err := e.RunClinicOpening(context.Background(), ClinicOpening{Doctors: 3, Patients: 150, Load: Load{Rate: 300, Workers: 32}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Figures["slots"] != 72 {
		t.Fatalf("slots %v, want 3 doctors × 24", r.Figures["slots"])
	}
	if r.Figures["window_booked"] != 72 || r.Figures["fill_ratio"] != 1 {
		t.Errorf("window patients booked %v (fill %v), want all 72", r.Figures["window_booked"], r.Figures["fill_ratio"])
	}
	if b := r.Figures["shipped_booked"]; b < 3 || b > 72 {
		t.Errorf("shipped patients booked %v, want between the first hour's 3 and 72", b)
	}
	if r.Ops["hold"].Count == 0 || r.Ops["shipped:hold"].Count == 0 {
		t.Errorf("ops %v: want hold (window patients) and shipped:hold", r.OpNames())
	}
	audited := false
	for _, c := range r.Checks {
		if !c.OK && !c.Skipped {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
		if c.Name == "every 201 appointment exists exactly once" && !c.Skipped {
			audited = true
		}
	}
	if !audited {
		t.Errorf("no appointment audit ran: %+v", r.Checks)
	}
}

// With --connected the patients' connections are open before the day opens
// (the booking page's reads of the first doctor's slots, up to the
// workers) and their holds re-use them: the opening dials none.
func TestClinicOpeningConnectedPatientsReuseThePageConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnvWith(t, bookingtest.Options{Configure: func(cfg *httpapi.Config, st *postgres.Store) {
		cfg.Clinics = postgres.NewClinicStore(st, 0)
	}})
	r, err := e.RunClinicOpening(context.Background(), ClinicOpening{Doctors: 2, Patients: 60, Models: []string{"window"},
		Connected: true, Load: Load{Rate: 300, Workers: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Figures["window_page_ms"]; !ok {
		t.Errorf("no window_page_ms figure: %v", r.Figures)
	}
	if got := r.Figures["window_dials"]; got != 0 {
		t.Errorf("the opening dialled %v connection(s), want 0: the page's were open", got)
	}
	if r.Figures["window_booked"] != 48 {
		t.Errorf("booked %v, want all 48 slots", r.Figures["window_booked"])
	}
	checksPass(t, r)
}
