package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/google/uuid"
)

// The region outage drill: three regions, a booking service and a router
// each, clients near every region. Under load, one region's booking service
// and router are killed. Writes for its partitions answer 503 with
// Retry-After from the surviving routers (its own clients fail over to
// them); `router shards drain` evacuates the dead region's partitions while
// it is down; holds for those partitions succeed again; the region comes
// back and refuses writes for the partitions it no longer homes. The audit
// then proves from the database that no booking was lost or duplicated.
//
// `go test ./internal/chaos/ -run TestRegionOutage` is the short drill (CI);
// `make drill` the long one. The report lands in .local/chaos/outage-*/.

// drillMode is the shape of one drill.
type drillMode struct {
	Name              string        `json:"name"`
	Warmup            time.Duration `json:"warmup"`
	OutageBeforeDrain time.Duration `json:"outage_before_drain"` // the operators' reaction time
	AfterDrain        time.Duration `json:"after_drain"`         // still down, partitions served elsewhere
	AfterReturn       time.Duration `json:"after_return"`
	DrainRate         float64       `json:"drain_rate"`
	HotelsPerRegion   int           `json:"hotels_per_region"`
	Rooms             int           `json:"rooms"`
	Load              loadConfig    `json:"load"`
}

func currentDrill() drillMode {
	if longMode() {
		return drillMode{Name: "long", Warmup: 10 * time.Second, OutageBeforeDrain: 15 * time.Second, AfterDrain: 15 * time.Second,
			AfterReturn: 10 * time.Second, DrainRate: 5, HotelsPerRegion: 6, Rooms: 5000,
			Load: loadConfig{Workers: 64, Rate: 80, Timeout: 10 * time.Second, RetryFor: 90 * time.Second, Window: 30,
				ConfirmPct: 50, CancelPct: 25, MaxAttempts: 120}}
	}
	return drillMode{Name: "short", Warmup: 2 * time.Second, OutageBeforeDrain: 3 * time.Second, AfterDrain: 3 * time.Second,
		AfterReturn: 2 * time.Second, DrainRate: 10, HotelsPerRegion: 2, Rooms: 2000,
		Load: loadConfig{Workers: 24, Rate: 30, Timeout: 8 * time.Second, RetryFor: 60 * time.Second, Window: 20,
			ConfirmPct: 50, CancelPct: 25, MaxAttempts: 100}}
}

// drillRegions and the victim: ap-south goes down.
var drillRegions = []string{"us-east", "eu-west", "ap-south"}

const victim = "ap-south"

// phase is a stretch of the drill.
type phase struct {
	Name     string    `json:"name"`
	From, To time.Time `json:"-"`
}

// answerTally counts the answers of the attempts in one phase, for one
// group of partitions.
type answerTally struct {
	Attempts int            `json:"attempts"`
	OK       int            `json:"ok"`
	Answers  map[string]int `json:"answers"` // every answer that was not a 2xx
}

// drillReport is what the drill writes and logs.
type drillReport struct {
	Mode     drillMode     `json:"mode"`
	Commit   string        `json:"commit"`
	Started  time.Time     `json:"started"`
	Victim   string        `json:"victim"`
	Hotels   int           `json:"hotels"`
	Killed   time.Time     `json:"killed"`
	Drain    string        `json:"drain_output"`
	DrainFor time.Duration `json:"drain_ns"`
	Moved    int           `json:"partitions_moved"`
	// Recovery per victim hotel: from the kill to its first successful
	// hold afterwards.
	Recovery    map[string]time.Duration  `json:"recovery_ns"`
	FromDrain   map[string]time.Duration  `json:"recovery_from_drain_start_ns"`
	Phases      []phase                   `json:"phases"`
	Victims     map[string]answerTally    `json:"victim_partitions"` // by phase
	Others      map[string]answerTally    `json:"other_partitions"`  // by phase
	Bad5xx      []string                  `json:"bad_5xx"`           // a 5xx that is not 503 with Retry-After
	Returned    []check                   `json:"after_return"`
	Bookings    bookingAudit              `json:"bookings"`
	Unresolved  int                       `json:"unresolved"`
	Violations  int                       `json:"invariant_violations"`
	FinalByKind map[string]map[string]int `json:"final_by_kind"`
}

func TestRegionOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("region outage drill: skipped in -short mode")
	}
	d := currentDrill()
	started := time.Now().UTC()
	root, _ := filepath.Abs("../..")
	runDir := filepath.Join(root, ".local", "chaos", "outage-"+d.Name+"-"+started.Format("20060102-150405"))
	s := startStack(t, runDir, stackOptions{regions: drillRegions, routers: drillRegions, noReadModel: true})
	from := time.Now().UTC().AddDate(0, 0, 7).Truncate(24 * time.Hour)
	hotels := s.seed(t, d.HotelsPerRegion-1, d.Rooms, d.Rooms, from.Format("2006-01-02"), from.AddDate(0, 0, d.Load.Window+1).Format("2006-01-02"))
	for i := range hotels {
		hotels[i].Hot = false // none sells out: a failed hold is the outage's doing
	}
	urls := make([]string, len(drillRegions))
	for i, r := range drillRegions {
		urls[i] = s.routerURLs[r]
	}
	rep := &drillReport{Mode: d, Started: started, Victim: victim, Hotels: len(hotels),
		Recovery: map[string]time.Duration{}, FromDrain: map[string]time.Duration{},
		Victims: map[string]answerTally{}, Others: map[string]answerTally{}}

	type rec struct {
		a      attemptInfo
		victim bool
		hotel  string
		kind   string
	}
	var (
		recMu sync.Mutex
		recs  []rec
	)
	l := newLoad(d.Load, urls, s.admin, hotels, from)
	l.onAttempt = func(o *op, a attemptInfo) {
		recMu.Lock()
		recs = append(recs, rec{a: a, victim: o.Hotel.Region == victim, hotel: o.Hotel.ID, kind: o.Kind})
		recMu.Unlock()
	}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); l.run(loadCtx) }()
	t.Cleanup(func() { stopLoad(); <-loadDone })

	mark := func(name string) {
		now := time.Now()
		if n := len(rep.Phases); n > 0 {
			rep.Phases[n-1].To = now
		}
		rep.Phases = append(rep.Phases, phase{Name: name, From: now})
	}
	mark("before")
	time.Sleep(d.Warmup)

	// The region goes down: its booking service and its router.
	mark("down")
	rep.Killed = time.Now()
	s.booking[victim].kill()
	s.routers[victim].kill()
	time.Sleep(d.OutageBeforeDrain)

	// The operators drain it while it is down.
	mark("draining")
	drainStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := runBin(ctx, filepath.Join(s.bin, "router"), []string{"BERTH_DATABASE_URL=" + s.pg.url("berth")},
		"shards", "drain", "--region", victim, "--rate", fmt.Sprint(d.DrainRate))
	rep.DrainFor = time.Since(drainStart)
	rep.Drain = strings.TrimSpace(out)
	if err != nil {
		t.Errorf("router shards drain: %v\n%s", err, out)
	}
	rep.Moved = strings.Count(out, " moved hotel ")
	var left int
	if err := dbtest.SQL(s.db).QueryRow(ctx, `SELECT count(*) FROM placements WHERE home_region = $1`, victim).Scan(&left); err != nil || left != 0 {
		t.Errorf("after the drain %d partitions are still homed in %s (%v)", left, victim, err)
	}
	mark("drained")
	time.Sleep(d.AfterDrain)

	// The region comes back.
	mark("returned")
	for _, p := range []*proc{s.booking[victim], s.routers[victim]} {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*proc{s.booking[victim], s.routers[victim]} {
		if err := p.waitReady(90 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	rep.Returned = s.probeReturned(t, hotels, from)
	time.Sleep(d.AfterReturn)
	stopLoad()
	<-loadDone
	rep.Phases[len(rep.Phases)-1].To = time.Now()
	l.resolveParked(2 * time.Minute)

	// Recovery: each victim hotel's first successful hold after the kill.
	for _, h := range hotels {
		if h.Region != victim {
			continue
		}
		l.mu.Lock()
		for _, su := range l.successes {
			if su.HotelID == h.ID && su.At.After(rep.Killed) {
				rep.Recovery[h.ID] = su.At.Sub(rep.Killed)
				rep.FromDrain[h.ID] = su.At.Sub(drainStart)
				break
			}
		}
		l.mu.Unlock()
		if _, ok := rep.Recovery[h.ID]; !ok {
			t.Errorf("victim hotel %s: no successful hold after the outage", h.ID)
		}
	}

	// Answers by phase, for the victim's partitions and the others'.
	recMu.Lock()
	for _, r := range recs {
		ph := "after"
		for _, p := range rep.Phases {
			if !r.a.At.Before(p.From) && r.a.At.Before(p.To) {
				ph = p.Name
			}
		}
		m := rep.Others
		if r.victim {
			m = rep.Victims
		}
		tal := m[ph]
		if tal.Answers == nil {
			tal.Answers = map[string]int{}
		}
		tal.Attempts++
		if r.a.Outcome == outOK {
			tal.OK++
		} else {
			tal.Answers[r.a.Answer]++
		}
		m[ph] = tal
		if r.a.Status >= 500 && (r.a.Status != http.StatusServiceUnavailable || r.a.RetryAfter == "") {
			rep.Bad5xx = append(rep.Bad5xx, fmt.Sprintf("%s %s of hotel %s via %s: %s (Retry-After %q)", ph, r.kind, r.hotel, drillRegions[r.a.Via], r.a.Answer, r.a.RetryAfter))
		}
	}
	recMu.Unlock()
	if len(rep.Bad5xx) > 0 {
		t.Errorf("%d 5xx answers were not 503 with Retry-After, first: %s", len(rep.Bad5xx), rep.Bad5xx[0])
	}
	if v := rep.Victims["down"]; v.Answers["503 unavailable"] == 0 {
		t.Errorf("no write of the victim's partitions met a 503 while it was down: the drill did not exercise the outage (%v)", v)
	}

	// The audit: every answer against the database.
	a, err := auditBookings(ctx, s.db, l.snapshotChains())
	if err != nil {
		t.Fatal(err)
	}
	rep.Bookings = a
	rep.Unresolved = a.UnresolvedAbsent + a.UnresolvedExist
	if a.Lost+a.Duplicated+a.Phantom+a.Mismatched+a.WrongState > 0 {
		t.Errorf("bookings: %d lost, %d duplicated, %d phantom, %d mismatched, %d in a wrong state; e.g. %v",
			a.Lost, a.Duplicated, a.Phantom, a.Mismatched, a.WrongState, first(a.Examples, 3))
	}
	results, err := verifyDB(ctx, s.db)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		rep.Violations += len(r.Violations)
		for i, v := range r.Violations {
			if i < 3 {
				t.Errorf("invariant %s: %s %s", r.Name, v.Partition, v.Detail)
			}
		}
	}
	rep.FinalByKind = map[string]map[string]int{}
	for _, o := range l.ops() {
		if rep.FinalByKind[o.Kind] == nil {
			rep.FinalByKind[o.Kind] = map[string]int{}
		}
		rep.FinalByKind[o.Kind][o.Final.String()]++
	}
	for _, c := range rep.Returned {
		if !c.OK {
			t.Errorf("after the region returned: %s: %s", c.Name, c.Detail)
		}
	}
	rep.write(t, runDir)
}

// probeReturned checks the region that came back: its booking service
// refuses a write for a partition it no longer homes (421 naming the new
// home, nothing written), and its router sends the same write to the new
// home.
func (s *stack) probeReturned(t *testing.T, hotels []hotel, from time.Time) []check {
	t.Helper()
	var h hotel
	for _, x := range hotels {
		if x.Region == victim {
			h = x
			break
		}
	}
	var home string
	if err := dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT home_region FROM placements WHERE kind = 'hotel' AND partition_id = $1`, h.ID).Scan(&home); err != nil {
		t.Fatal(err)
	}
	guest := "probe-" + uuid.NewString()
	body, _ := json.Marshal(map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID, "check_in": from.Format("2006-01-02"),
		"check_out": from.AddDate(0, 0, 1).Format("2006-01-02"), "quantity": 1})
	post := func(base string) (int, map[string]any, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/hotels/"+h.ID+"/reservations", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.admin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", uuid.NewString())
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			return 0, map[string]any{"error": err.Error()}, nil
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(data, &m)
		return resp.StatusCode, m, resp.Header
	}
	var out []check
	status, m, _ := post(s.urls[victim])
	out = append(out, check{Name: "returned booking service refuses a drained partition",
		OK:     status == http.StatusMisdirectedRequest && m["code"] == "misdirected" && m["home_region"] == home && home != victim,
		Detail: fmt.Sprintf("direct hold to booking %s for hotel %s (now homed in %s): %d %v", victim, h.ID, home, status, m["code"])})
	var n int
	if err := dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE guest_id = $1`, guest).Scan(&n); err != nil {
		t.Fatal(err)
	}
	out = append(out, check{Name: "the refused write left nothing", OK: n == 0, Detail: fmt.Sprintf("%d reservations of the probe guest", n)})
	status, m, hdr := post(s.routerURLs[victim])
	out = append(out, check{Name: "returned router sends the write to the new home",
		OK:     status == http.StatusCreated && hdr.Get("X-Berth-Served-By") == home,
		Detail: fmt.Sprintf("hold through router %s: %d served by %q (home %s) %v", victim, status, hdr.Get("X-Berth-Served-By"), home, m["code"])})
	return out
}

// markdown renders the drill's report.
func (rep *drillReport) markdown() string {
	var b strings.Builder
	m := rep.Mode
	fmt.Fprintf(&b, "### Region outage drill: %s (%s, commit %s)\n\n", m.Name, rep.Started.Format(time.RFC3339), rep.Commit)
	fmt.Fprintf(&b, "Three regions (%s), a booking service and a router each; %d hotels spread evenly; %d workers, %.0f holds/s, "+
		"every chain's client near a random region (failing over to the next region's router when its own does not answer), "+
		"%d%% of holds confirmed, %d%% cancelled; unknown outcomes retried with the same Idempotency-Key. "+
		"Up %s, then booking service and router of **%s** killed; drain started %s later (`router shards drain --region %s --rate %g`); "+
		"the region restarted %s after the drain; load for %s more.\n\n",
		strings.Join(drillRegions, ", "), rep.Hotels, m.Load.Workers, m.Load.Rate, m.Load.ConfirmPct, m.Load.CancelPct,
		m.Warmup, rep.Victim, m.OutageBeforeDrain, rep.Victim, m.DrainRate, m.AfterDrain, m.AfterReturn)
	var rec, fromDrain []time.Duration
	for id, d := range rep.Recovery {
		rec = append(rec, d)
		fromDrain = append(fromDrain, rep.FromDrain[id])
	}
	slices.Sort(rec)
	slices.Sort(fromDrain)
	if len(rec) > 0 {
		fmt.Fprintf(&b, "**Time to recovery** (kill → first successful hold of each of the %d drained hotels): median %s, max %s; "+
			"from the start of the drain: median %s, max %s. The drain moved %d partitions in %s.\n\n",
			len(rec), median(rec).Round(time.Millisecond), rec[len(rec)-1].Round(time.Millisecond),
			median(fromDrain).Round(time.Millisecond), fromDrain[len(fromDrain)-1].Round(time.Millisecond),
			rep.Moved, rep.DrainFor.Round(time.Millisecond))
	}
	b.WriteString("| phase | partitions | attempts | ok | other answers |\n|---|---|---:|---:|---|\n")
	for _, p := range rep.Phases {
		for _, g := range []struct {
			name string
			m    map[string]answerTally
		}{{rep.Victim + "'s", rep.Victims}, {"others'", rep.Others}} {
			tal := g.m[p.Name]
			fmt.Fprintf(&b, "| %s (%s) | %s | %d | %d | %s |\n", p.Name, p.To.Sub(p.From).Round(100*time.Millisecond), g.name,
				tal.Attempts, tal.OK, cell(fmtCounts(tal.Answers)))
		}
	}
	fmt.Fprintf(&b, "\n5xx answers that were not 503 with Retry-After: %d. Final outcomes: %v.\n\n", len(rep.Bad5xx), rep.FinalByKind)
	b.WriteString("| check | result | detail |\n|---|---|---|\n")
	for _, c := range rep.Returned {
		res := "pass"
		if !c.OK {
			res = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, res, cell(c.Detail))
	}
	a := rep.Bookings
	fmt.Fprintf(&b, "\nAudit: %d holds; %d answered ok and present exactly once; %d lost; %d duplicated; %d phantom; %d unresolved "+
		"(%d of them present, %d absent); invariant violations (booking verify): %d.\n",
		a.Holds, a.OKExactlyOnce, a.Lost, a.Duplicated, a.Phantom, rep.Unresolved, a.UnresolvedExist, a.UnresolvedAbsent, rep.Violations)
	return b.String()
}

// median of sorted durations (the mean of the middle two when even).
func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func fmtCounts(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range m {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	var parts []string
	for _, x := range all {
		parts = append(parts, fmt.Sprintf("%s ×%d", x.k, x.v))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

// write logs the report and saves it as JSON and markdown.
func (rep *drillReport) write(t *testing.T, dir string) {
	t.Helper()
	rep.Commit = gitCommit()
	md := rep.markdown()
	t.Log("\n" + md + "\ndrain output:\n" + rep.Drain)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("report: %v", err)
		return
	}
	data, _ := json.MarshalIndent(rep, "", "  ")
	for name, body := range map[string][]byte{"report.json": data, "report.md": []byte(md)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	_ = os.WriteFile(filepath.Join(filepath.Dir(dir), "latest-outage-"+rep.Mode.Name+".md"), []byte(md), 0o644)
	t.Logf("report: %s", filepath.Join(dir, "report.md"))
}
