package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/jackc/pgx/v5"
)

// The per-guest counts before an appointment hold read only the guest's
// own index entries, also through a generic plan made while appointments
// was empty or nearly so, as a new deployment's first opening makes it and
// then keeps for the connection's life. Here the statements are prepared
// and planned (generic) on the fresh, never analyzed table, and again once
// it holds 30 appointments; then 600 live appointments of other guests of
// the clinic are added, and every count reads a handful of buffers. With
// clinic_id = $1 AND guest_id = $2 (and a plain index on them) the plans
// made then scanned the clinic's live appointments or the doctor's day:
// hundreds of buffers.
func TestGuestCountsReadTheGuestsEntriesOnAFreshTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	conn, err := dbtest.SQL(db).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	const clinic, doctor = `'11111111-1111-1111-1111-111111111111'`, `'22222222-2222-2222-2222-222222222222'`
	explain := func(sql string) int { // shared buffers hit
		t.Helper()
		var out string
		if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sql, pgx.QueryExecModeSimpleProtocol).Scan(&out); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var plan []struct {
			Plan struct {
				Hit int `json:"Shared Hit Blocks"`
			}
		}
		if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan) != 1 {
			t.Fatalf("%s: %v %s", sql, err, out)
		}
		return plan[0].Plan.Hit
	}
	insert := func(from, to int) {
		t.Helper()
		exec(fmt.Sprintf(`INSERT INTO appointments (clinic_id, appointment_id, home_region, doctor_id, slot_id, guest_id, starts_at,
			ends_at, local_date, status, channel, created_by_subject, created_by_role, hold_expires_at)
		SELECT %s, gen_random_uuid(), 'us-east', %s, gen_random_uuid(), 'guest-' || g,
			now() + interval '1 day', now() + interval '1 day 15 minutes', CURRENT_DATE + 1,
			CASE WHEN g %% 2 = 0 THEN 'held' ELSE 'confirmed' END, 'app', 'guest-' || g, 'guest', now() + interval '10 minutes'
		FROM generate_series(%d, %d) AS g`, clinic, doctor, from, to))
	}
	exec(`SET plan_cache_mode = force_generic_plan`)
	counts := map[string]string{}
	prepare := func(when string) { // and plan now (generic: the parameters unknown)
		t.Helper()
		for name, sql := range map[string]string{
			"the guest's live appointments of the clinic":                  postgres.CountClinicGuestSQLForTest,
			"the guest's other live appointments with the doctor that day": postgres.LiveElsewhereSQLForTest,
		} {
			stmt := fmt.Sprintf("s%d", len(counts))
			exec(`PREPARE ` + stmt + ` AS ` + sql)
			run := `EXECUTE ` + stmt + `(` + clinic + `, 'guest-x')`
			if sql == postgres.LiveElsewhereSQLForTest {
				run = `EXECUTE ` + stmt + `(` + clinic + `, ` + doctor + `, 'guest-x', CURRENT_DATE + 1, '')`
			}
			explain(run)
			counts[name+", planned "+when] = run
		}
	}
	prepare("on the empty table")
	insert(1, 30)
	prepare("with 30 appointments")
	insert(31, 630)
	for name, run := range counts {
		if hit := explain(run); hit > 10 {
			t.Errorf("%s: %d buffers read for a guest with none among 630 appointments, want a handful", name, hit)
		}
	}
}
