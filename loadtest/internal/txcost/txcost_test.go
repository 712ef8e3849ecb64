package txcost

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var minimalBound = map[string]bool{"h": true, "t": true, "d": true, "n": true}

// pgbench must run the same statements as the Go driver: every $n becomes
// the variable the step names, and nothing else changes.
func TestPgbenchScriptNamesEveryArgument(t *testing.T) {
	t.Parallel()
	for _, hot := range []bool{false, true} {
		sc := minimalScript(hot)
		got, err := pgbenchScript(sc, "\\set h 1\n", "", minimalBound)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, "$") {
			t.Errorf("hot=%v: a placeholder was left:\n%s", hot, got)
		}
		lines := strings.Split(strings.TrimSpace(got), "\n")
		if lines[1] != "BEGIN;" || lines[len(lines)-1] != "COMMIT;" || len(lines) != len(sc.Trips)+3 {
			t.Errorf("hot=%v: want header, BEGIN, %d statements, COMMIT:\n%s", hot, len(sc.Trips), got)
		}
		if !strings.Contains(got, "WHERE hotel_id = :h AND room_type_id = :t") || !strings.Contains(got, "+ :d::int + :n::int") {
			t.Errorf("hot=%v: arguments not named:\n%s", hot, got)
		}
	}
	bad := minimalScript(false)
	bad.Trips[0].Steps[0].Args = bad.Trips[0].Steps[0].Args[:2]
	if _, err := pgbenchScript(bad, "", "", minimalBound); err == nil {
		t.Error("a $n without an argument name rendered without error")
	}
	if _, err := pgbenchScript(minimalScript(false), "", "", map[string]bool{"h": true, "t": true, "d": true}); err == nil {
		t.Error("an argument bound by nothing (n) rendered without error")
	}
}

// Rounds alternate the legs' order, so that every leg's mean turn is the
// same over two rounds.
func TestOrderRunsEveryOtherRoundBackwards(t *testing.T) {
	t.Parallel()
	got := order(3, 3)
	want := []step{{0, 1}, {1, 1}, {2, 1}, {2, 2}, {1, 2}, {0, 2}, {0, 3}, {1, 3}, {2, 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("order(3, 3) = %v, want %v", got, want)
	}
	for _, rounds := range []int{0, 1} {
		if got := order(2, rounds); !slices.Equal(got, []step{{0, 1}, {1, 1}}) {
			t.Errorf("order(2, %d) = %v, want the legs once, in order", rounds, got)
		}
	}
	turns := map[int]int{}
	for i, s := range order(4, 2) {
		turns[s.Leg] += i
	}
	for leg, sum := range turns {
		if sum != turns[0] {
			t.Errorf("over two rounds leg %d's turns sum to %d, leg 0's to %d", leg, sum, turns[0])
		}
	}
}

// Each ratio is taken against the minimal transaction of the leg's own
// round, and the summary averages them.
func TestPrintTakesEachRatioWithinItsRound(t *testing.T) {
	t.Parallel()
	row := func(leg, client string, round int, ops int64, cpu time.Duration) Row {
		return Row{Leg: leg, Client: client, Shape: "spread", Round: round, Ops: ops, Seconds: 1, BackendCPU: cpu}
	}
	rows := []Row{
		row(LegMinimal, "pgbench", 1, 1000, 300*time.Millisecond),
		row(LegStoreBatched, "in-process", 1, 800, 300*time.Millisecond),
		// The machine at half speed in round 2: both legs alike.
		row(LegStoreBatched, "in-process", 2, 300, 300*time.Millisecond),
		row(LegMinimal, "pgbench", 2, 500, 300*time.Millisecond),
	}
	var b strings.Builder
	Print(&b, Options{Workers: 16, Duration: time.Second, Stay: 3, Rounds: 2}, rows)
	out := b.String()
	if got := rateRatio(rows, rows[2], "pgbench"); got != 0.6 {
		t.Errorf("round 2's ratio = %v, want 300/500 = 0.6 (its own round's minimal)", got)
	}
	var summary string
	for line := range strings.Lines(out[strings.Index(out, "over the rounds:"):]) {
		if strings.TrimSpace(line) == "" {
			break // the rounds' table ends
		}
		if strings.Contains(line, LegStoreBatched) {
			summary = line
		}
	}
	// Rates 800 and 300 (mean 550); ratios 0.80 and 0.60 (mean 0.70); CPU
	// per tx 375 and 1,000 µs against 300 and 600: 0.80 and 0.60.
	for _, want := range []string{" 550 ", "0.80, 0.60", "0.70"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary line %q lacks %q; whole output:\n%s", summary, want, out)
		}
	}
}

// The aims' lines compare the store as shipped with the minimal
// transaction of its shape, averaged over the rounds, by rate and by CPU.
func TestPrintSaysWhetherTheAimsAreMet(t *testing.T) {
	t.Parallel()
	row := func(leg, shape string, round int, ops int64, cpu time.Duration) Row {
		client := "in-process"
		if leg == LegMinimal {
			client = "pgbench"
		}
		return Row{Leg: leg, Client: client, Shape: shape, Round: round, Ops: ops, Seconds: 1, BackendCPU: cpu}
	}
	rows := []Row{
		row(LegMinimal, "spread", 1, 1000, 200*time.Millisecond),
		row(LegStoreBatched, "spread", 1, 600, 150*time.Millisecond), // 0.60 by rate; CPU 250 µs against 200: 0.80
		row(LegStoreBatched, "spread", 2, 700, 175*time.Millisecond), // 0.70; 250 µs against 200: 0.80
		row(LegMinimal, "spread", 2, 1000, 200*time.Millisecond),
		row(LegMinimal, "hot", 1, 100, 100*time.Millisecond),
		row(LegStoreBatched, "hot", 1, 310, 100*time.Millisecond), // 3.10 by rate; CPU 323 µs against 1,000: 3.10
	}
	var b strings.Builder
	Print(&b, Options{Workers: 16, Duration: time.Second, Stay: 3, Rounds: 2}, rows)
	out := b.String()
	for _, want := range []string{
		"spread ≥ 0.7 ×: by rate 0.65 (not met), by CPU 0.80 (met)",
		"hot    ≥ 3.0 ×: by rate 3.10 (met), by CPU 3.10 (met)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A ratio printed as the aim meets it.
func TestMetTextReadsTheFigureAsPrinted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		x, aim float64
		want   string
	}{{0.6996, 0.7, "met"}, {0.694, 0.7, "not met"}, {2.996, 3, "met"}, {0, 0.7, "no figure"}} {
		if got := metText(c.x, c.aim); got != c.want {
			t.Errorf("metText(%v, %v) = %q, want %q", c.x, c.aim, got, c.want)
		}
	}
}

// A negative --lanes is refused before anything is created.
func TestRunRefusesNegativeLanes(t *testing.T) {
	t.Parallel()
	_, err := Run(t.Context(), "postgres://127.0.0.1:1/none", Options{Stay: 3, Nights: 30, Lanes: -1})
	if err == nil || !strings.Contains(err.Error(), "--lanes -1") {
		t.Fatalf("Run with --lanes -1: %v, want the flag named", err)
	}
}

// A negative --rounds is refused before anything is created.
func TestRunRefusesNegativeRounds(t *testing.T) {
	t.Parallel()
	_, err := Run(t.Context(), "postgres://127.0.0.1:1/none", Options{Stay: 3, Nights: 30, Rounds: -1})
	if err == nil || !strings.Contains(err.Error(), "--rounds -1") {
		t.Fatalf("Run with --rounds -1: %v, want the flag named", err)
	}
}

// The batched leg's note gives a batch's cycle by phase, per batch.
func TestBatchNoteGivesABatchsPhases(t *testing.T) {
	r := Row{Ops: 40, Batches: 4, Batched: 36, BatchLock: 1200 * time.Microsecond, BatchDecide: 400 * time.Microsecond,
		BatchCommit: 6 * time.Millisecond}
	want := "(4 batches, 9.0 holds each; 36 of 40 holds batched; a batch: lock 300 µs, decide 100 µs, commit 1500 µs)"
	if got := strings.TrimSpace(r.batchNote()); got != want {
		t.Errorf("batch note %q, want %q", got, want)
	}
	if got := (Row{Ops: 40, Groups: 2, Grouped: 10}).batchNote(); strings.Contains(got, "a batch:") {
		t.Errorf("a leg without batches notes their phases: %q", got)
	}
}
