// Package audit checks, from the database after a run, that the platform
// kept its one invariant whatever happened during the run: per night,
// reserved equals the rooms of live reservations and never exceeds the
// sellable limit; at most one live appointment per slot; every 201 the
// client saw is in the database exactly once; the read model agrees.
package audit

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Created is one thing the client saw created with a 201.
type Created struct {
	Kind        string // "hotel" (a reservation) or "clinic" (an appointment)
	PartitionID string
	ID          string
	// Status is the last status the client was told (held, confirmed …).
	Status string
}

// Ledger collects what the client was told during a run.
type Ledger struct {
	mu      sync.Mutex
	items   map[string]*Created // kind/partition/id → item
	dupes   []string
	touched map[string]map[string]bool // kind → partition ids
	guests  map[string]bool
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{items: map[string]*Created{}, touched: map[string]map[string]bool{}, guests: map[string]bool{}}
}

// Touch records that the run wrote to a partition (the audit checks it).
func (l *Ledger) Touch(kind, partitionID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.touched[kind] == nil {
		l.touched[kind] = map[string]bool{}
	}
	l.touched[kind][partitionID] = true
}

// Add records a 201. The same id answered twice as "created" to two
// different requests is a violation the audit reports.
func (l *Ledger) Add(c Created, guestID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := c.Kind + "/" + c.PartitionID + "/" + c.ID
	if _, ok := l.items[k]; ok {
		l.dupes = append(l.dupes, k)
		return
	}
	l.items[k] = &c
	l.guests[guestID] = true
	if l.touched[c.Kind] == nil {
		l.touched[c.Kind] = map[string]bool{}
	}
	l.touched[c.Kind][c.PartitionID] = true
}

// SetStatus records a later status the client was told (confirm → 200).
func (l *Ledger) SetStatus(kind, partitionID, id, status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.items[kind+"/"+partitionID+"/"+id]; c != nil {
		c.Status = status
	}
}

// Len is the number of created items of a kind.
func (l *Ledger) Len(kind string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.items {
		if c.Kind == kind {
			n++
		}
	}
	return n
}

// Touched returns the partitions of a kind the run wrote to.
func (l *Ledger) Touched(kind string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.touched[kind]))
	for id := range l.touched[kind] {
		out = append(out, id)
	}
	return out
}

// Items returns a copy of the created items of a kind.
func (l *Ledger) Items(kind string) []Created {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Created
	for _, c := range l.items {
		if c.Kind == kind {
			out = append(out, *c)
		}
	}
	return out
}

// Guests returns the guests that got a 201.
func (l *Ledger) Guests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.guests))
	for g := range l.guests {
		out = append(out, g)
	}
	return out
}

// Run performs every database check and returns them. It reads one
// consistent snapshot (REPEATABLE READ, read only), so a sweeper running
// meanwhile cannot make the audit see half of a transaction.
func Run(ctx context.Context, pool *pgxpool.Pool, l *Ledger) []report.Check {
	var checks []report.Check
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		checks = append(checks, Inventory(ctx, tx, l.Touched("hotel")))
		checks = append(checks, Reservations(ctx, tx, l))
		checks = append(checks, Slots(ctx, tx, l.Touched("clinic")))
		checks = append(checks, Appointments(ctx, tx, l))
		return nil
	})
	if err != nil {
		checks = append(checks, report.Check{Name: "audit snapshot", OK: false, Detail: err.Error()})
	}
	l.mu.Lock()
	dupes := append([]string(nil), l.dupes...)
	l.mu.Unlock()
	c := report.Check{Name: "no id created twice (client view)", OK: len(dupes) == 0, Detail: "every 201 named a new id"}
	if len(dupes) > 0 {
		c.Detail = fmt.Sprintf("%d id(s) answered 201 to two requests, e.g. %s", len(dupes), dupes[0])
	}
	return append(checks, c)
}

// inventorySQL lists every night of the given hotels whose counter
// disagrees with the live reservations covering it, or exceeds its limit.
const inventorySQL = `
WITH touched AS (SELECT DISTINCT unnest($1::UUID[]) AS hotel_id),
want AS (
    SELECT r.hotel_id, r.room_type_id, n::DATE AS night, sum(r.quantity)::INT8 AS q
    FROM reservations r
    JOIN touched t ON t.hotel_id = r.hotel_id
    CROSS JOIN LATERAL generate_series(r.check_in::TIMESTAMP, (r.check_out - 1)::TIMESTAMP, INTERVAL '1 day') AS n
    WHERE r.status IN ('held', 'confirmed')
    GROUP BY 1, 2, 3
)
SELECT i.hotel_id::TEXT, i.room_type_id::TEXT, i.night::TEXT, i.reserved, i.sell_limit, COALESCE(w.q, 0)
FROM room_inventory i
JOIN touched t ON t.hotel_id = i.hotel_id
LEFT JOIN want w ON w.hotel_id = i.hotel_id AND w.room_type_id = i.room_type_id AND w.night = i.night
WHERE i.reserved <> COALESCE(w.q, 0) OR i.reserved > i.sell_limit OR i.reserved < 0
UNION ALL
SELECT w.hotel_id::TEXT, w.room_type_id::TEXT, w.night::TEXT, -1, -1, w.q
FROM want w
WHERE NOT EXISTS (SELECT 1 FROM room_inventory i
                  WHERE i.hotel_id = w.hotel_id AND i.room_type_id = w.room_type_id AND i.night = w.night)
LIMIT 20`

// Inventory checks the hotel invariant on the given hotels (all hotels
// when hotelIDs is nil is too slow at 91 M rows; pass the touched ones).
func Inventory(ctx context.Context, tx pgx.Tx, hotelIDs []string) report.Check {
	c := report.Check{Name: "inventory: reserved = live reservations ≤ sell_limit, every night"}
	if len(hotelIDs) == 0 {
		c.OK, c.Skipped, c.Detail = true, true, "no hotel written"
		return c
	}
	var nights int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM room_inventory WHERE hotel_id = ANY($1::UUID[])`, hotelIDs).Scan(&nights); err != nil {
		c.Detail = "count nights: " + err.Error()
		return c
	}
	rows, err := tx.Query(ctx, inventorySQL, hotelIDs)
	if err != nil {
		c.Detail = "query: " + err.Error()
		return c
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var hotel, rt, night string
		var reserved, limit int32
		var want int64
		if err := rows.Scan(&hotel, &rt, &night, &reserved, &limit, &want); err != nil {
			c.Detail = "scan: " + err.Error()
			return c
		}
		if limit < 0 {
			bad = append(bad, fmt.Sprintf("%s/%s %s: %d room(s) reserved on a night with no inventory row", hotel, rt, night, want))
		} else {
			bad = append(bad, fmt.Sprintf("%s/%s %s: reserved %d, live reservations %d, sell_limit %d", hotel, rt, night, reserved, want, limit))
		}
	}
	if err := rows.Err(); err != nil {
		c.Detail = "rows: " + err.Error()
		return c
	}
	if len(bad) > 0 {
		c.Detail = fmt.Sprintf("%d+ night(s) wrong: %s", len(bad), strings.Join(bad, "; "))
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%d nights of %d hotel(s) consistent", nights, len(hotelIDs))
	return c
}

// Reservations checks that every reservation the client saw created exists
// exactly once, in the partition it was told, with a status at least as far
// as it was told (a confirmed one is still confirmed).
func Reservations(ctx context.Context, tx pgx.Tx, l *Ledger) report.Check {
	return checkCreated(ctx, tx, l.Items("hotel"), "every 201 reservation exists exactly once",
		`SELECT hotel_id::TEXT, reservation_id::TEXT, status FROM reservations
		 WHERE reservation_id = ANY($1::UUID[])`)
}

// Appointments is Reservations for clinics.
func Appointments(ctx context.Context, tx pgx.Tx, l *Ledger) report.Check {
	items := l.Items("clinic")
	if len(items) == 0 {
		return report.Check{Name: "every 201 appointment exists exactly once", OK: true, Skipped: true, Detail: "no appointment created"}
	}
	return checkCreated(ctx, tx, items, "every 201 appointment exists exactly once",
		`SELECT clinic_id::TEXT, appointment_id::TEXT, status FROM appointments
		 WHERE appointment_id = ANY($1::UUID[])`)
}

func checkCreated(ctx context.Context, tx pgx.Tx, items []Created, name, query string) report.Check {
	c := report.Check{Name: name}
	if len(items) == 0 {
		c.OK, c.Skipped, c.Detail = true, true, "nothing created"
		return c
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	type row struct{ partition, status string }
	found := map[string][]row{}
	rows, err := tx.Query(ctx, query, ids)
	if err != nil {
		c.Detail = "query: " + err.Error()
		return c
	}
	for rows.Next() {
		var p, id, st string
		if err := rows.Scan(&p, &id, &st); err != nil {
			rows.Close()
			c.Detail = "scan: " + err.Error()
			return c
		}
		found[id] = append(found[id], row{p, st})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		c.Detail = "rows: " + err.Error()
		return c
	}
	var bad []string
	for _, it := range items {
		rs := found[it.ID]
		switch {
		case len(rs) == 0:
			bad = append(bad, it.ID+": missing")
		case len(rs) > 1:
			bad = append(bad, fmt.Sprintf("%s: %d rows", it.ID, len(rs)))
		case rs[0].partition != it.PartitionID:
			bad = append(bad, fmt.Sprintf("%s: in partition %s, client was told %s", it.ID, rs[0].partition, it.PartitionID))
		case it.Status == "confirmed" && rs[0].status != "confirmed":
			bad = append(bad, fmt.Sprintf("%s: client was told confirmed, database says %s", it.ID, rs[0].status))
		}
	}
	if len(bad) > 0 {
		c.Detail = fmt.Sprintf("%d of %d wrong: %s", len(bad), len(items), strings.Join(bad[:min(len(bad), 10)], "; "))
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%d created, all present once", len(items))
	return c
}

// TableExists reports whether a table exists in the current schema path.
func TableExists(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, name string) bool {
	var ok bool
	_ = q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok)
	return ok
}

// Slots checks at most one live appointment per slot and that every
// occupied slot points at a live appointment, over the given clinics (all
// clinics when none were touched but the tables exist).
func Slots(ctx context.Context, tx pgx.Tx, clinicIDs []string) report.Check {
	c := report.Check{Name: "slots: at most one live appointment per slot"}
	if !TableExists(ctx, tx, "appointments") {
		c.OK, c.Skipped, c.Detail = true, true, "no appointments table yet"
		return c
	}
	if len(clinicIDs) == 0 {
		c.OK, c.Skipped, c.Detail = true, true, "no clinic written"
		return c
	}
	var doubles int64
	var example string
	err := tx.QueryRow(ctx, `
		SELECT count(*), COALESCE(min(slot_id::TEXT), '') FROM (
		  SELECT slot_id FROM appointments
		  WHERE clinic_id = ANY($1::UUID[]) AND status IN ('held', 'confirmed')
		    AND (status = 'confirmed' OR hold_expires_at IS NULL OR hold_expires_at > now())
		  GROUP BY clinic_id, slot_id HAVING count(*) > 1) d`, clinicIDs).Scan(&doubles, &example)
	if err != nil {
		c.Detail = "query: " + err.Error()
		return c
	}
	var orphans int64
	if TableExists(ctx, tx, "slots") {
		err = tx.QueryRow(ctx, `
			SELECT count(*) FROM slots s
			WHERE s.clinic_id = ANY($1::UUID[]) AND s.status = 'booked'
			  AND NOT EXISTS (SELECT 1 FROM appointments a WHERE a.clinic_id = s.clinic_id
			                  AND a.appointment_id = s.appointment_id AND a.status = 'confirmed')`, clinicIDs).Scan(&orphans)
		if err != nil {
			c.Detail = "query slots: " + err.Error()
			return c
		}
	}
	if doubles > 0 || orphans > 0 {
		c.Detail = fmt.Sprintf("%d slot(s) with two live appointments (e.g. %s); %d booked slot(s) without a confirmed appointment", doubles, example, orphans)
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%d clinic(s): no double booking", len(clinicIDs))
	return c
}
