package postgres

import (
	"context"
	"fmt"
	"time"
)

// Violation is one breach of an invariant found by Verify.
type Violation struct {
	Partition string `json:"partition"`
	Detail    string `json:"detail"`
}

// CheckResult is the outcome of one invariant check.
type CheckResult struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Skipped     string      `json:"skipped,omitempty"`
	Violations  []Violation `json:"violations"`
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Region limits the checks to partitions homed there ("" = all).
	Region string
	// StaleHoldAfter: a hotel hold still 'held' this long past its expiry
	// means the sweeper is not keeping up (sweep interval plus margin).
	StaleHoldAfter time.Duration
	// EventWindow: confirmed bookings updated within it must have their
	// confirmation event in the outbox (older sent rows may be pruned).
	EventWindow time.Duration
	// Limit bounds the violations listed per check.
	Limit int
}

// Verify checks the invariants straight from the database, read-only:
//   - every night's reserved equals the sum of its live reservations and
//     stays within [0, sell_limit];
//   - at most one live appointment per slot, and every live appointment's
//     slot is held or booked;
//   - no hotel hold lingers past its expiry longer than StaleHoldAfter;
//   - every recently confirmed booking has its confirmation event.
func Verify(ctx context.Context, db *DB, o VerifyOptions) ([]CheckResult, error) {
	if o.Limit <= 0 {
		o.Limit = 100
	}
	if o.StaleHoldAfter <= 0 {
		o.StaleHoldAfter = 5 * time.Minute
	}
	if o.EventWindow <= 0 {
		o.EventWindow = 48 * time.Hour
	}
	hasClinics, err := tableExists(ctx, db, "appointments")
	if err != nil {
		return nil, err
	}
	checks := []struct {
		name, desc string
		clinic     bool
		sql        string
		args       []any
	}{
		{"inventory_matches_reservations", "every night: reserved = sum of live reservations, 0 ≤ reserved ≤ sell_limit", false, `
			SELECT i.hotel_id::TEXT, 'room type ' || i.room_type_id::TEXT || ' night ' || i.night::TEXT ||
			       ': reserved=' || i.reserved || ' live=' || COALESCE(SUM(r.quantity), 0) || ' limit=' || i.sell_limit
			FROM room_inventory i
			LEFT JOIN reservations r ON r.hotel_id = i.hotel_id AND r.room_type_id = i.room_type_id
			     AND r.status IN ('held', 'confirmed') AND r.check_in <= i.night AND r.check_out > i.night
			WHERE ($1 = '' OR i.home_region = $1)
			GROUP BY i.hotel_id, i.room_type_id, i.night, i.reserved, i.sell_limit
			HAVING i.reserved <> COALESCE(SUM(r.quantity), 0) OR i.reserved > i.sell_limit OR i.reserved < 0
			ORDER BY 1, 2 LIMIT $2`, []any{o.Region, o.Limit}},
		{"reservation_nights_exist", "every live reservation's nights exist in inventory", false, `
			SELECT r.hotel_id::TEXT, 'reservation ' || r.reservation_id::TEXT || ' covers ' ||
			       (r.check_out - r.check_in) || ' nights but ' || count(i.night) || ' exist'
			FROM reservations r
			LEFT JOIN room_inventory i ON i.hotel_id = r.hotel_id AND i.room_type_id = r.room_type_id
			     AND i.night >= r.check_in AND i.night < r.check_out
			WHERE r.status IN ('held', 'confirmed') AND ($1 = '' OR r.home_region = $1)
			GROUP BY r.hotel_id, r.reservation_id, r.check_in, r.check_out
			HAVING count(i.night) <> (r.check_out - r.check_in)
			ORDER BY 1, 2 LIMIT $2`, []any{o.Region, o.Limit}},
		{"stale_hotel_holds", "no hotel hold stays 'held' long past its expiry (the sweeper runs)", false, `
			SELECT hotel_id::TEXT, 'reservation ' || reservation_id::TEXT || ' expired at ' || hold_expires_at::TEXT
			FROM reservations
			WHERE status = 'held' AND hold_expires_at < now() - $3 * INTERVAL '1 microsecond'
			  AND ($1 = '' OR home_region = $1)
			ORDER BY 1, 2 LIMIT $2`, []any{o.Region, o.Limit, o.StaleHoldAfter.Microseconds()}},
		{"confirmed_reservation_has_event", "every recently confirmed reservation has its reservation.confirmed event", false, `
			SELECT r.hotel_id::TEXT, 'reservation ' || r.reservation_id::TEXT || ' confirmed at ' || r.updated_at::TEXT || ' has no event'
			FROM reservations r
			WHERE r.status = 'confirmed' AND r.updated_at > now() - $3 * INTERVAL '1 microsecond'
			  AND ($1 = '' OR r.home_region = $1)
			  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.partition_id = r.hotel_id AND o.aggregate_id = r.reservation_id
			                  AND o.event_type = 'reservation.confirmed')
			ORDER BY 1, 2 LIMIT $2`, []any{o.Region, o.Limit, o.EventWindow.Microseconds()}},
		{"one_live_appointment_per_slot", "every slot is held or booked by at most one person", true, `
			SELECT clinic_id::TEXT, 'slot ' || slot_id::TEXT || ' has ' || count(*) || ' live appointments'
			FROM appointments
			WHERE status IN ('held', 'confirmed') AND ($1 = '' OR home_region = $1)
			GROUP BY clinic_id, slot_id HAVING count(*) > 1
			ORDER BY 1, 2 LIMIT $2`, []any{o.Region, o.Limit}},
		{"live_appointment_slot_taken", "every live appointment's slot is held or booked", true, `
			SELECT a.clinic_id::TEXT, 'appointment ' || a.appointment_id::TEXT || ' is ' || a.status ||
			       ' but its slot is ' || COALESCE(s.status, 'missing')
			FROM appointments a
			LEFT JOIN slots s ON s.clinic_id = a.clinic_id AND s.slot_id = a.slot_id
			WHERE a.status IN ('held', 'confirmed') AND ($1 = '' OR a.home_region = $1)
			  AND (s.status IS NULL OR s.status NOT IN ('held', 'booked'))
			ORDER BY 1, 2 LIMIT $2`, []any{o.Region, o.Limit}},
		{"confirmed_appointment_has_event", "every recently confirmed appointment has its appointment.confirmed event", true, `
			SELECT a.clinic_id::TEXT, 'appointment ' || a.appointment_id::TEXT || ' has no confirmation event'
			FROM appointments a
			WHERE a.status = 'confirmed' AND a.updated_at > now() - $3 * INTERVAL '1 microsecond'
			  AND ($1 = '' OR a.home_region = $1)
			  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.partition_id = a.clinic_id AND o.aggregate_id = a.appointment_id
			                  AND o.event_type = 'appointment.confirmed')
			ORDER BY 1, 2 LIMIT $2`, []any{o.Region, o.Limit, o.EventWindow.Microseconds()}},
	}
	var out []CheckResult
	for _, c := range checks {
		res := CheckResult{Name: c.name, Description: c.desc, Violations: []Violation{}}
		if c.clinic && !hasClinics {
			res.Skipped = "no clinic tables"
			out = append(out, res)
			continue
		}
		rows, err := db.pool.Query(ctx, c.sql, c.args...)
		if err != nil {
			return out, fmt.Errorf("verify %s: %w", c.name, err)
		}
		for rows.Next() {
			var v Violation
			if err := rows.Scan(&v.Partition, &v.Detail); err != nil {
				rows.Close()
				return out, fmt.Errorf("verify %s: %w", c.name, err)
			}
			res.Violations = append(res.Violations, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return out, fmt.Errorf("verify %s: %w", c.name, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func tableExists(ctx context.Context, db *DB, name string) (bool, error) {
	var ok bool
	err := db.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1)`,
		name).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up table %s: %w", name, err)
	}
	return ok, nil
}
