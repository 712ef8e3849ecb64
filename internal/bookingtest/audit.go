package bookingtest

import (
	"context"

	"github.com/berthhq/berth/internal/postgres"
)

// InventoryViolations checks the hotel invariant straight from the
// database with the checks of `booking verify`: for every night, reserved
// equals the sum of quantities of the live (held + confirmed) reservations
// covering it and stays within the sellable limit, and every live
// reservation's nights exist. It returns one line per violation.
func InventoryViolations(ctx context.Context, db *postgres.DB) ([]string, error) {
	results, err := postgres.Verify(ctx, db, postgres.VerifyOptions{Limit: 100_000})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range results {
		if r.Name != "inventory_matches_reservations" && r.Name != "reservation_nights_exist" {
			continue
		}
		for _, v := range r.Violations {
			out = append(out, r.Name+": hotel "+v.Partition+" "+v.Detail)
		}
	}
	return out, nil
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
