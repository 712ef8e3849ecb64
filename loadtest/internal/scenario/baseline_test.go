package scenario

import (
	"context"
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
	for _, c := range r.Checks {
		if !c.OK {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
	}
}
