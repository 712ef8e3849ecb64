package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// The audit of `booking verify` sees a slot and its appointment that stop
// pointing at each other, each way round, and keeps to the clinics it is
// asked about.
func TestVerifyFindsSlotsAndAppointmentsApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startClinics(t, 0)
	clinic := e.seedClinic("UTC")
	other := e.seedClinic("UTC")
	doctor := e.seedDoctor(clinic, 30, false, allWeek("08:00", "12:00"))
	day := bookingtest.Date(5)
	e.materialize(clinic, day, bookingtest.Date(6))
	slots := e.slots(clinic, doctor, day)
	var appts []string
	for i, g := range []string{"g1", "g2"} {
		r, err := e.hold(ctx, clinic, g, map[string]any{"slot_id": slots[i].ID})
		if err != nil || r.Status != http.StatusCreated {
			t.Fatalf("hold: %v %d %s", err, r.Status, r.Body)
		}
		appts = append(appts, r.JSON()["appointment_id"].(string))
	}
	e.AssertSlots(clinic)

	sql := dbtest.SQL(e.DB)
	for _, stmt := range []string{
		// The slot of the first appointment now names another guest.
		`UPDATE slots SET held_by = 'intruder' WHERE clinic_id = '` + clinic + `' AND slot_id = '` + slots[0].ID + `'`,
		// The second appointment claims a slot that does not name it.
		`UPDATE appointments SET slot_id = '` + slots[2].ID + `' WHERE clinic_id = '` + clinic + `' AND appointment_id = '` + appts[1] + `'`,
	} {
		if _, err := sql.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	got, err := bookingtest.SlotViolations(ctx, e.DB, clinic)
	if err != nil {
		t.Fatal(err)
	}
	count := func(check string) int {
		return len(slices.DeleteFunc(slices.Clone(got), func(l string) bool { return !strings.HasPrefix(l, check+":") }))
	}
	// Appointment 1 (slot names an intruder) and appointment 2 (its slot is
	// open) do not match their slots; slot 2 names appointment 2, which now
	// claims another slot.
	if count(postgres.CheckAppointmentOnSlot) != 2 || count(postgres.CheckSlotHasAppointment) != 1 {
		t.Fatalf("violations %q: want 2 of %s and 1 of %s", got, postgres.CheckAppointmentOnSlot, postgres.CheckSlotHasAppointment)
	}
	if elsewhere, err := bookingtest.SlotViolations(ctx, e.DB, other); err != nil || len(elsewhere) != 0 {
		t.Fatalf("another clinic's audit: %q %v, want clean", elsewhere, err)
	}
}
