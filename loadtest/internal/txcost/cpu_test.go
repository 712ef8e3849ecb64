package txcost

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/jackc/pgx/v5"
)

// The meter counts the CPU of the database's backends during a leg, also of
// one that connects, works and disconnects in between (as pgbench's do),
// and not its own.
func TestBackendMeterCountsBackendsThatComeAndGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	meterConn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer meterConn.Close(ctx)
	idle, err := meterBackends(ctx, meterConn).Stop()
	if err != nil {
		t.Fatal(err)
	}
	m := meterBackends(ctx, meterConn)
	worker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	// Long enough to be sampled (every 100 ms) while it burns CPU.
	if _, err := worker.Exec(ctx, `SELECT count(*) FROM generate_series(1, 20000000)`); err != nil {
		t.Fatal(err)
	}
	if err := worker.Close(ctx); err != nil {
		t.Fatal(err)
	}
	busy, err := m.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if idle != 0 {
		t.Errorf("no other backend, nothing run: metered %v, want 0 (the meter's own backend is not counted)", idle)
	}
	if busy <= 0 {
		t.Errorf("a backend that counted 20 million rows and disconnected: metered %v, want > 0", busy)
	}
}
