package bookingtest

import (
	"context"
	"fmt"

	"github.com/berthhq/berth/internal/postgres"
)

// InventoryViolations checks the hotel invariant straight from the
// database: for every night, reserved equals the sum of quantities of the
// live (held + confirmed) reservations covering it, and stays within the
// sellable limit. It returns one line per violating night.
func InventoryViolations(ctx context.Context, db *postgres.DB) ([]string, error) {
	rows, err := db.Pool.Query(ctx, `
		SELECT i.hotel_id::TEXT, i.room_type_id::TEXT, i.night::TEXT, i.reserved, i.sell_limit,
		       COALESCE(SUM(r.quantity), 0)::INT8 AS live
		FROM room_inventory i
		LEFT JOIN reservations r
		       ON r.hotel_id = i.hotel_id AND r.room_type_id = i.room_type_id
		      AND r.status IN ('held', 'confirmed') AND r.check_in <= i.night AND r.check_out > i.night
		GROUP BY i.hotel_id, i.room_type_id, i.night, i.reserved, i.sell_limit
		HAVING i.reserved <> COALESCE(SUM(r.quantity), 0) OR i.reserved > i.sell_limit OR i.reserved < 0
		ORDER BY 1, 2, 3`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			hotel, rt, night      string
			reserved, limit, live int64
		)
		if err := rows.Scan(&hotel, &rt, &night, &reserved, &limit, &live); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("hotel %s room type %s night %s: reserved=%d live=%d limit=%d", hotel, rt, night, reserved, live, limit))
	}
	return out, rows.Err()
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
