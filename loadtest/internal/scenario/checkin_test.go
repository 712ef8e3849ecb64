package scenario

import (
	"context"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A check-in morning with 10 % overbooking against a real booking server:
// every standard room is checked in, the suites go as upgrades, the rest
// are relocated to the sister hotel through the saga (run in-process: the
// test server has no broker), and the audit — postgres.Verify, walks
// included — passes. BERTH_CHECKIN_ARRIVALS and BERTH_CHECKIN_RATE size a
// longer run for the report (docs/PERFORMANCE.md).
func TestCheckInMorningEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	arrivals := 66
	if v, err := strconv.Atoi(os.Getenv("BERTH_CHECKIN_ARRIVALS")); err == nil && v > 0 {
		arrivals = v
	}
	rate := 1000.0
	if v, err := strconv.ParseFloat(os.Getenv("BERTH_CHECKIN_RATE"), 64); err == nil && v > 0 {
		rate = v
	}
	env := bookingtest.Start(t, bookingtest.Options{})
	tg, err := client.ParseTargets("us-east=" + env.URL)
	if err != nil {
		t.Fatal(err)
	}
	tg.Kind = map[string]string{"us-east": "booking"}
	cl, err := client.New(tg, bookingtest.Secret, "", "", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	pool, err := pgxpool.New(context.Background(), env.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := &Env{Client: cl, DB: pool, Store: env.DB, Log: io.Discard, Quiet: true}
	r, err := e.RunCheckInMorning(context.Background(), CheckInMorning{Arrivals: arrivals, OverbookingPct: 10,
		Load: Load{Rate: rate, Workers: 16},
		Settle: func(ctx context.Context) error {
			_, err := bookingtest.PumpWalks(ctx, env.DB, env.Store)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	checksPass(t, r)
	rooms := r.Config["rooms"].(int)
	suites := r.Config["suites"].(int)
	if int(r.Figures["walks_upgrade"]) != suites || int(r.Figures["walks_relocated"]) != arrivals-rooms-suites {
		t.Errorf("walks: %v upgrades, %v relocated; want %d and %d", r.Figures["walks_upgrade"], r.Figures["walks_relocated"], suites, arrivals-rooms-suites)
	}
	t.Logf("arrivals %d, rooms %d, suites %d: %.1f check-ins/s, check_in p99 %.1f ms, upgrade p99 %.1f ms, relocate p99 %.1f ms, walks: %v upgrade, %v relocated (settled in %.2f s)",
		arrivals, rooms, suites, r.Figures["check_ins_per_s"], r.Ops["check_in"].P99Ms, r.Ops["upgrade"].P99Ms, r.Ops["relocate"].P99Ms,
		r.Figures["walks_upgrade"], r.Figures["walks_relocated"], r.Figures["relocations_settle_s"])
}
