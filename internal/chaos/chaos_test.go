package chaos

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/postgres"
)

// longMode reports whether the long suite runs (make chaos).
func longMode() bool { return chaosTag || os.Getenv("BERTH_CHAOS_LONG") != "" }

// mode is the shape of one run.
type mode struct {
	Name      string        `json:"name"`
	FaultFor  time.Duration `json:"fault_for"`  // how long each fault lasts
	SettleFor time.Duration `json:"settle_for"` // quiet time after each recovery
	Warmup    time.Duration `json:"warmup"`
	Load      loadConfig    `json:"load"`
	Hotels    int           `json:"hotels_per_region"`
	// SlotMinutes: each clinic's two doctors have 08:00–12:00 in slots of
	// this length on two days — the few slots patients race for.
	SlotMinutes int           `json:"slot_minutes"`
	Rooms       int           `json:"rooms"`
	HotRooms    int           `json:"hot_rooms"`
	ConvergeIn  time.Duration `json:"converge_in"`
}

func currentMode() mode {
	if longMode() {
		return mode{Name: "long", FaultFor: 15 * time.Second, SettleFor: 5 * time.Second, Warmup: 10 * time.Second,
			Hotels: 3, Rooms: 5000, HotRooms: 8, ConvergeIn: 3 * time.Minute, SlotMinutes: 15,
			Load: loadConfig{Workers: 96, Rate: 150, Timeout: 10 * time.Second, RetryFor: 60 * time.Second, Window: 30,
				HotPct: 20, ClinicPct: 25, WalkPct: 3, ConfirmPct: 50, CancelPct: 25, MaxAttempts: 60}}
	}
	return mode{Name: "short", FaultFor: 2 * time.Second, SettleFor: time.Second, Warmup: 3 * time.Second,
		Hotels: 2, Rooms: 2000, HotRooms: 6, ConvergeIn: 2 * time.Minute, SlotMinutes: 30,
		Load: loadConfig{Workers: 32, Rate: 60, Timeout: 8 * time.Second, RetryFor: 30 * time.Second, Window: 20,
			HotPct: 20, ClinicPct: 25, WalkPct: 4, ConfirmPct: 50, CancelPct: 25, MaxAttempts: 40}}
}

// progressBound is the promise: a hold succeeds within it after a fault heals.
const progressBound = 30 * time.Second

// TestChaos runs the platform under load through every fault and audits
// the outcome. It is the short version unless BERTH_CHAOS_LONG=1 or the
// chaos build tag is set; `go test -short` skips it.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: skipped in -short mode")
	}
	m := currentMode()
	started := time.Now().UTC()
	root, _ := filepath.Abs("../..")
	runDir := filepath.Join(root, ".local", "chaos", m.Name+"-"+started.Format("20060102-150405"))
	s := startStack(t, runDir, stackOptions{})
	from := time.Now().UTC().AddDate(0, 0, 7).Truncate(24 * time.Hour)
	hotels := s.seed(t, m.Hotels, m.Rooms, m.HotRooms, from.Format("2006-01-02"), from.AddDate(0, 0, m.Load.Window+1).Format("2006-01-02"))

	clinics := s.seedClinics(t, m.SlotMinutes, from.AddDate(0, 0, 2))
	walkPairs, walkDay := s.seedWalks(t)
	e := s.startEdges(t, from.AddDate(0, 0, 5))

	l := newLoad(m.Load, []string{s.routerURL}, s.admin, hotels, from)
	l.clinics, l.guestToken = clinics, s.mint
	l.walkPairs, l.walkDay = walkPairs, walkDay
	loadCtx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); l.run(loadCtx) }()
	t.Cleanup(func() { stopLoad(); <-loadDone })

	probeCtx, stopProbe := context.WithCancel(context.Background())
	patientCtx, stopPatients := context.WithCancel(context.Background())
	edgesDone := make(chan struct{})
	go func() { defer close(edgesDone); e.run(probeCtx, patientCtx) }()
	t.Cleanup(func() { stopPatients(); stopProbe(); <-edgesDone })

	rep := &report{Mode: m, Started: started, Hotels: len(hotels), Clinics: len(clinics), Regions: s.regions}
	time.Sleep(m.Warmup)
	ctx := context.Background()
	watch := newLagWatch(s.db)
	for _, f := range s.faults(longMode()) {
		r := runFault(t, ctx, s, l, f, m)
		rep.Faults = append(rep.Faults, r)
		if r.Progress {
			watch.add(len(rep.Faults)-1, r.probe, r.Healed)
		}
	}
	stopLoad()
	<-loadDone
	rep.LoadEnded = time.Now().UTC()
	stopPatients()
	e.finalWindow(2*time.Minute, 3*time.Second)
	stopProbe()
	<-edgesDone
	edgeRep := e.audit(rep.Faults)
	rep.Edges = &edgeRep
	rep.LoadStarted = l.started.UTC()

	// Every unknown outcome gets a last chance now that all is healed.
	l.resolveParked(2 * time.Minute)
	// The relocation sagas settle: a step lost to a fault is resumed.
	rep.walksLeft, rep.walksSettled = waitWalks(ctx, s.db, m.ConvergeIn)
	rep.audit(t, ctx, s, l, m)
	for i, d := range watch.wait(m.ConvergeIn) {
		rep.Faults[i].ReadModelLag = d
	}
	rep.write(t, runDir)
}

// runFault injects one fault for the mode's duration, heals it and
// measures the time to the first successful hold after healing.
func runFault(t *testing.T, ctx context.Context, s *stack, l *load, f fault, m mode) faultResult {
	t.Helper()
	r := faultResult{Name: f.Name, Target: f.Target, What: f.What}
	r.Injected = time.Now()
	if err := f.inject(ctx); err != nil {
		t.Errorf("fault %s: inject: %v", f.Name, err)
		r.Note = "inject failed: " + err.Error()
	}
	if f.heal != nil {
		hold := m.FaultFor
		if f.holdFor > 0 {
			hold = f.holdFor
		}
		time.Sleep(hold)
		note, err := f.heal(ctx)
		if err != nil {
			t.Errorf("fault %s: heal: %v", f.Name, err)
			note = "heal failed: " + err.Error()
		}
		if note != "" {
			r.Note = note
		}
	}
	r.Healed = time.Now()
	// Wait for progress, generously past the bound so the report shows how
	// long it really took.
	deadline := r.Healed.Add(progressBound + 30*time.Second)
	for {
		if first, ok := l.firstSuccessAfter(r.Healed); ok {
			r.Progress = true
			r.TimeToSuccess = first.At.Sub(r.Healed)
			r.probe = first
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !r.Progress || r.TimeToSuccess > progressBound {
		t.Errorf("fault %s: no successful hold within %s of healing (waited %s)", f.Name, progressBound, time.Since(r.Healed).Round(time.Millisecond))
	}

	// The booking services must all be up again before the next fault.
	for _, region := range s.regions {
		if err := s.booking[region].waitReady(90 * time.Second); err != nil {
			t.Errorf("fault %s: %v", f.Name, err)
		}
	}
	time.Sleep(m.SettleFor)
	r.Ended = time.Now()
	return r
}

// verifyDB runs the invariant checker of `booking verify`.
func verifyDB(ctx context.Context, db *postgres.DB) ([]postgres.CheckResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return postgres.Verify(ctx, db, postgres.VerifyOptions{})
}
