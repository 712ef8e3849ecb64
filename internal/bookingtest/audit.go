package bookingtest

import (
	"context"
	"slices"

	"github.com/berthhq/berth/internal/postgres"
)

// Violations runs the audit of `booking verify` (postgres.Verify) on the
// given partitions (all when none) and returns one line per violation of
// the named checks.
func Violations(ctx context.Context, db *postgres.DB, partitions []string, checks ...string) ([]string, error) {
	results, err := postgres.Verify(ctx, db, postgres.VerifyOptions{Partitions: partitions, Limit: 100_000})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range results {
		if !slices.Contains(checks, r.Name) {
			continue
		}
		for _, v := range r.Violations {
			out = append(out, r.Name+": "+v.Partition+" "+v.Detail)
		}
	}
	return out, nil
}

// InventoryViolations checks the hotel invariant straight from the
// database with the checks of `booking verify`: for every night, reserved
// equals the sum of quantities of the reservations occupying it and stays
// within the sellable limit, every occupied night exists, and no room is
// assigned twice on a night, and every guest's counted holds (the per-guest
// limits) equal their held reservations (postgres.HotelInvariants). It
// returns one line per violation.
func InventoryViolations(ctx context.Context, db *postgres.DB) ([]string, error) {
	return Violations(ctx, db, nil, postgres.HotelInvariants...)
}

// SlotViolations checks the clinic invariant of the given clinics with the
// checks of `booking verify`: at most one live appointment per slot, every
// live appointment and its slot point at each other, and the waitlist offers
// agree with their appointments, first come first served
// (postgres.ClinicInvariants).
func SlotViolations(ctx context.Context, db *postgres.DB, clinicIDs ...string) ([]string, error) {
	return Violations(ctx, db, clinicIDs, postgres.ClinicInvariants...)
}

// AssertInventory fails the test when the hotel invariant is violated.
func (e *Env) AssertInventory() {
	e.T.Helper()
	v, err := InventoryViolations(context.Background(), e.DB)
	if err != nil {
		e.T.Fatalf("audit inventory: %v", err)
	}
	for _, line := range v {
		e.T.Error("invariant violated: " + line)
	}
}

// AssertSlots fails the test when the slot invariant of a clinic is
// violated.
func (e *Env) AssertSlots(clinicID string) {
	e.T.Helper()
	v, err := SlotViolations(context.Background(), e.DB, clinicID)
	if err != nil {
		e.T.Fatalf("audit slots: %v", err)
	}
	for _, line := range v {
		e.T.Error("invariant violated: " + line)
	}
}
