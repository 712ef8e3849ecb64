package scenario

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// A short baseline against a real booking server on a fresh database: the
// SQL leg replays the store's own hold statements, every one of its holds
// lands, and the audit of `booking verify` finds its reservations and
// nights in step. (Mode "both" would add a minute of waiting for events that
// no relay in this test publishes.)
func TestBaselineSQLLegRunsTheStoresHold(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnv(t)
	r, err := e.RunBaseline(context.Background(), Baseline{Hotels: 2, RoomTypes: 2, Nights: 5, Mode: "sql",
		Load: Load{Workers: 4, Duration: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Ops["hold_sql"]; s.Count == 0 || s.Outcomes["ok"] != s.Count {
		t.Errorf("hold_sql: %d holds, outcomes %v; want every one ok", s.Count, s.Outcomes)
	}
	audited := false
	for _, c := range r.Checks {
		audited = audited || (c.OK && !c.Skipped && len(c.Name) > 10 && c.Name[:10] == "inventory:")
	}
	if !audited {
		t.Errorf("no inventory audit ran: %+v", r.Checks)
	}
	checksPass(t, r)
}

// The HTTP leg against a real booking server: every hold is a real,
// authenticated request of its own — its own guest, token and
// Idempotency-Key — and the database holds one reservation and one
// idempotency key per 201 the generator counted, each guest's once.
func TestBaselineHTTPLegSendsDistinctAuthenticatedHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnv(t)
	r, err := e.RunBaseline(context.Background(), Baseline{Hotels: 2, RoomTypes: 2, Nights: 5, Mode: "http",
		Load: Load{Workers: 4, Duration: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Ops["hold_http"]
	if s.Count == 0 || s.Outcomes["ok"] != s.Count {
		t.Fatalf("hold_http: %d holds, outcomes %v; want every one ok", s.Count, s.Outcomes)
	}
	checksPass(t, r)
	var reservations, guests, keys int64
	if err := e.DB.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT guest_id) FROM reservations`).Scan(&reservations, &guests); err != nil {
		t.Fatal(err)
	}
	if err := e.DB.QueryRow(context.Background(), `SELECT count(DISTINCT idem_key) FROM idempotency_keys`).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if reservations != s.Count || guests != s.Count || keys != s.Count {
		t.Errorf("%d holds answered 201; the database has %d reservations of %d guests and %d idempotency keys", s.Count, reservations, guests, keys)
	}
}

// With Hot, a second HTTP leg holds one room type's same night: every one
// of its holds lands on that night (one reservation per 201, none sold
// out), the spread leg before it is unchanged, and the report compares the
// two rates.
func TestBaselineHotLegHoldsOneNight(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnv(t)
	r, err := e.RunBaseline(context.Background(), Baseline{Hotels: 3, RoomTypes: 2, Nights: 5, Mode: "http", Hot: true,
		Load: Load{Workers: 4, Duration: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	spread, hot := r.Ops["hold_http"], r.Ops["hold_http_hot"]
	if spread.Count == 0 || spread.Outcomes["ok"] != spread.Count {
		t.Fatalf("hold_http: %d holds, outcomes %v; want every one ok", spread.Count, spread.Outcomes)
	}
	if hot.Count == 0 || hot.Outcomes["ok"] != hot.Count {
		t.Fatalf("hold_http_hot: %d holds, outcomes %v; want every one ok", hot.Count, hot.Outcomes)
	}
	checksPass(t, r)
	// The hot night has the hot leg's holds and whatever of the spread leg
	// fell on it; no other (room type, night) has more than the spread leg.
	var most, second int64
	if err := e.DB.QueryRow(context.Background(), `SELECT max(n), coalesce(min(n) FILTER (WHERE r > 1), 0) FROM (
		SELECT count(*) AS n, row_number() OVER (ORDER BY count(*) DESC) AS r FROM reservations
		GROUP BY hotel_id, room_type_id, check_in) AS c WHERE r <= 2`).Scan(&most, &second); err != nil {
		t.Fatal(err)
	}
	if most < hot.Count || second > spread.Count {
		t.Errorf("busiest night %d reservations, next %d; want ≥ %d (the hot leg) and ≤ %d (the spread leg)", most, second, hot.Count, spread.Count)
	}
	if f := r.Figures["throughput_ratio_hot_to_spread"]; f <= 0 {
		t.Errorf("throughput_ratio_hot_to_spread = %v, want the ratio of the two legs", f)
	}
}

// holdBody encodes to the bytes of the map it replaced (encoding/json sorts
// a map's keys): the platform receives the same hold body as before.
func TestHoldBodyEncoding(t *testing.T) {
	t.Parallel()
	got, err := json.Marshal(holdBody("base-0123456789ab", "rt-1", "2026-12-08", "2026-12-09", 2))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(map[string]any{"guest_id": "base-0123456789ab", "room_type_id": "rt-1", "check_in": "2026-12-08",
		"check_out": "2026-12-09", "quantity": 2})
	if string(got) != string(want) {
		t.Fatalf("holdBody encodes to %s, the map to %s", got, want)
	}
}
