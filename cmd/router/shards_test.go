package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// cancelAfter is an output that cancels a context once n moves were
// reported: an operator's Ctrl-C (or a killed pod) half-way through.
type cancelAfter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Count(c.buf.String(), "] moved ") >= c.n {
		c.cancel()
	}
	return len(p), nil
}

func homes(t *testing.T, db *postgres.DB) map[string]int {
	t.Helper()
	rows, err := dbtest.SQL(db).Query(context.Background(), `SELECT home_region, count(*) FROM placements GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			r string
			n int
		)
		if err := rows.Scan(&r, &n); err != nil {
			t.Fatal(err)
		}
		out[r] = n
	}
	return out
}

// drain killed half-way and run again finishes the job: every partition
// ends outside the drained region, and none was moved twice.
func TestDrainInterruptedThenResumed(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	for range 10 {
		env.SeedHotel("us-east", 2, 0, bookingtest.Date(1), bookingtest.Date(3))
	}
	env.SeedHotel("eu-west", 0, 0, "", "")
	cfg := shardsConfig{DatabaseURL: env.DBURL, Output: "text"}

	ctx, cancel := context.WithCancel(context.Background())
	out := &cancelAfter{n: 4, cancel: cancel}
	err := runDrain(ctx, cfg, drainOptions{Region: "us-east", Rate: 50}, out)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "interrupted after 4 of 10") || !strings.Contains(err.Error(), "re-run") {
		t.Fatalf("interrupted drain: %v\n%s", err, out.buf.String())
	}
	if cli.ExitCode(err) != 1 {
		t.Fatalf("exit code %d, want 1", cli.ExitCode(err))
	}
	if left := homes(t, env.DB)["us-east"]; left != 6 {
		t.Fatalf("after the interruption %d partitions are left in us-east, want 6", left)
	}

	var again bytes.Buffer
	if err := runDrain(context.Background(), cfg, drainOptions{Region: "us-east", Rate: 50}, &again); err != nil {
		t.Fatalf("resumed drain: %v\n%s", err, again.String())
	}
	if !strings.Contains(again.String(), "6 partitions left to move") {
		t.Fatalf("resumed drain should plan only what is left:\n%s", again.String())
	}
	h := homes(t, env.DB)
	if h["us-east"] != 0 || h["eu-west"]+h["ap-south"] != 11 {
		t.Fatalf("after the drain: %v", h)
	}
	// Spread evenly, counting what eu-west carried already (1 + 10 = 11).
	if h["eu-west"] != 5 && h["eu-west"] != 6 {
		t.Fatalf("uneven drain: %v", h)
	}
	var twice int
	if err := dbtest.SQL(env.DB).QueryRow(context.Background(), `SELECT count(*) FROM placements WHERE version > 2`).Scan(&twice); err != nil || twice != 0 {
		t.Fatalf("%d partitions were moved more than once (%v)", twice, err)
	}
	// A third run has nothing to do and says so.
	var third bytes.Buffer
	if err := runDrain(context.Background(), cfg, drainOptions{Region: "us-east", Rate: 50}, &third); err != nil ||
		!strings.Contains(third.String(), "0 partitions left") {
		t.Fatalf("third run: %v\n%s", err, third.String())
	}
}

func TestBalanceDryRunThenApply(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	for range 9 {
		env.SeedHotel("us-east", 1, 0, bookingtest.Date(1), bookingtest.Date(2))
	}
	cfg := shardsConfig{DatabaseURL: env.DBURL, Output: "json"}
	var out bytes.Buffer
	if err := runBalance(context.Background(), cfg, balanceOptions{By: "count", Rate: 50, DryRun: true}, &out); err != nil {
		t.Fatal(err)
	}
	var sum planSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if len(sum.Plan) != 6 || sum.Applied != 0 || !sum.DryRun {
		t.Fatalf("dry run summary: %+v", sum)
	}
	if h := homes(t, env.DB); h["us-east"] != 9 {
		t.Fatalf("dry run moved something: %v", h)
	}
	out.Reset()
	if err := runBalance(context.Background(), cfg, balanceOptions{By: "count", Rate: 50}, &out); err != nil {
		t.Fatal(err)
	}
	if h := homes(t, env.DB); h["us-east"] != 3 || h["eu-west"] != 3 || h["ap-south"] != 3 {
		t.Fatalf("after balance: %v", h)
	}
	// By load: the outbox has writes only from the seeded partitions' catalog
	// (none), so there is nothing worth moving.
	out.Reset()
	if err := runBalance(context.Background(), cfg, balanceOptions{By: "load", Window: 15 * 60e9, Rate: 50, DryRun: true}, &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runList(context.Background(), cfg, true, &out); err != nil {
		t.Fatal(err)
	}
	var list listOutput
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list.Regions) != 3 || len(list.Partitions) != 9 {
		t.Fatalf("list: %v\n%s", err, out.String())
	}
	if list.Regions[0].Region != "us-east" || list.Regions[0].Partitions[berth.KindHotel] != 3 {
		t.Fatalf("list: %+v", list.Regions)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Setenv("BERTH_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
	for _, args := range [][]string{
		{"shards"},
		{"shards", "bogus"},
		{"shards", "move", "--kind", "boat", "--id", "x", "--to", "eu-west"},
		{"shards", "move", "--nope"},
		{"shards", "drain"},
		{"shards", "drain", "--region", "us-east", "--to", "us-east"},
		{"shards", "balance", "--by", "mood"},
		{"shards", "list", "--output", "yaml"},
		{"serve", "--region", "mars"},
		{"serve", "extra"},
	} {
		cmd := newRootCmd()
		cmd.SetArgs(args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.ExecuteContext(context.Background())
		if err == nil || cli.ExitCode(err) != 2 {
			t.Errorf("%v: err %v, exit %d; want a usage error (2)", args, err, cli.ExitCode(err))
		}
	}
	// A good command that fails on the database is a failure (1), not usage.
	cmd := newRootCmd()
	cmd.SetArgs([]string{"shards", "list"})
	cmd.SetOut(&bytes.Buffer{})
	if err := cmd.ExecuteContext(context.Background()); err == nil || cli.ExitCode(err) != 1 {
		t.Errorf("list against a dead database: %v, exit %d", err, cli.ExitCode(err))
	}
}
