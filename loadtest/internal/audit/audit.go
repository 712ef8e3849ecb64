// Package audit checks, from the database after a run, that the platform
// kept its one invariant whatever happened during the run: per night,
// reserved equals the rooms of live reservations and never exceeds the
// sellable limit; at most one live appointment per slot; every 201 the
// client saw is in the database exactly once; the read model agrees.
package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/berthhq/berth/internal/postgres"
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

// Run performs every database check and returns them: the invariants with
// the audit of `booking verify` (one snapshot of its own), then what the
// client was told, in one consistent snapshot (REPEATABLE READ, read only).
func Run(ctx context.Context, db *postgres.DB, pool *pgxpool.Pool, l *Ledger) []report.Check {
	checks := Invariants(ctx, db, l.Touched("hotel"), l.Touched("clinic"))
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		checks = append(checks, Reservations(ctx, tx, l))
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

// Invariants runs the audit of `booking verify` (postgres.Verify) on the
// hotels and clinics the run wrote (a whole database of 91 M nights is too
// slow to audit after every run): the hotel invariant, night by night, and
// the slot invariant — at most one live appointment per slot, and a live
// appointment and its slot pointing at each other.
func Invariants(ctx context.Context, db *postgres.DB, hotelIDs, clinicIDs []string) []report.Check {
	groups := []struct {
		name   string
		ids    []string
		checks []string
	}{
		{"inventory: reserved = occupying reservations ≤ sell_limit, every night; rooms never used twice a night", hotelIDs,
			postgres.HotelInvariants},
		{"slots: at most one live appointment per slot, slot and appointment agree, waitlist offers agree", clinicIDs,
			postgres.ClinicInvariants},
	}
	partitions := append(append([]string{}, hotelIDs...), clinicIDs...)
	var (
		results []postgres.CheckResult
		err     error
	)
	if len(partitions) > 0 {
		results, err = postgres.Verify(ctx, db, postgres.VerifyOptions{Partitions: partitions, Limit: 20})
	}
	out := make([]report.Check, 0, len(groups))
	for _, g := range groups {
		c := report.Check{Name: g.name}
		switch {
		case len(g.ids) == 0:
			c.OK, c.Skipped, c.Detail = true, true, "nothing written"
		case err != nil:
			c.Detail = "verify: " + err.Error()
		default:
			var bad []string
			for _, r := range results {
				if !slices.Contains(g.checks, r.Name) {
					continue
				}
				if r.Skipped != "" {
					bad = append(bad, r.Name+" skipped: "+r.Skipped)
				}
				for _, v := range r.Violations {
					bad = append(bad, r.Name+" "+v.Partition+": "+v.Detail)
				}
			}
			c.OK = len(bad) == 0
			c.Detail = fmt.Sprintf("%d partition(s) consistent", len(g.ids))
			if !c.OK {
				c.Detail = fmt.Sprintf("%d+ violation(s): %s", len(bad), strings.Join(bad[:min(len(bad), 10)], "; "))
			}
		}
		out = append(out, c)
	}
	return out
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
