package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// faultResult is one row of the report.
type faultResult struct {
	Name          string        `json:"name"`
	Target        string        `json:"target"`
	What          string        `json:"what"`
	Injected      time.Time     `json:"injected"`
	Healed        time.Time     `json:"healed"`
	Ended         time.Time     `json:"ended"`
	Progress      bool          `json:"progress"`
	TimeToSuccess time.Duration `json:"time_to_first_success_ns"`
	Note          string        `json:"note,omitempty"`
	// ReadModelLag: how long after healing the first post-heal booking
	// showed in the read model (-1 = never within the budget).
	ReadModelLag time.Duration `json:"read_model_lag_ns"`
	probe        success
	// Outcomes of the requests started while the fault was on (first
	// attempt), and how many of the unknown ones resolved.
	Requests counts `json:"requests"`
}

// counts tallies outcomes.
type counts struct {
	Total    int `json:"total"`
	OK       int `json:"ok"`
	Rejected int `json:"rejected"`
	Failed   int `json:"failed"`
	Unknown  int `json:"unknown"`  // first attempt
	Resolved int `json:"resolved"` // of those unknown, resolved by retries
	Retries  int `json:"retries"`
}

func (c *counts) add(o *op) {
	c.Total++
	switch o.First {
	case outOK:
		c.OK++
	case outRejected:
		c.Rejected++
	case outFailed:
		c.Failed++
	case outUnknown:
		c.Unknown++
		if o.Final != outUnknown {
			c.Resolved++
		}
	}
	c.Retries += o.Attempts - 1
}

// report is what a run writes to .local/chaos/ and logs.
type report struct {
	Mode        mode      `json:"mode"`
	Commit      string    `json:"commit"`
	Started     time.Time `json:"started"`
	LoadStarted time.Time `json:"load_started"`
	LoadEnded   time.Time `json:"load_ended"`
	Finished    time.Time `json:"finished"`
	Regions     []string  `json:"regions"`
	Hotels      int       `json:"hotels"`

	Faults   []faultResult     `json:"faults"`
	ByKind   map[string]counts `json:"by_kind"`   // hold, confirm, cancel over the whole run
	Final    map[string]int    `json:"final"`     // final outcomes over the whole run
	Codes    map[string]int    `json:"codes"`     // status/code of definite non-2xx answers
	Unknowns map[string]int    `json:"unknowns"`  // what the unknown first attempts looked like
	HoldRate float64           `json:"hold_rate"` // holds started per second of load

	Bookings    bookingAudit           `json:"bookings"`
	Visits      visitAudit             `json:"appointments"`
	Clinics     int                    `json:"clinics"`
	Stream      streamAudit            `json:"stream"`
	ClinicEvts  streamAudit            `json:"clinic_stream"`
	Verify      []postgres.CheckResult `json:"verify"`
	ReadModel   string                 `json:"read_model"`
	RedisKeys   int                    `json:"redis_keys_after"`
	DeadLetters int64                  `json:"read_model_dead_letters"`
	Checks      []check                `json:"checks"`
	Violations  int                    `json:"invariant_violations"`
	Edges       *edgeReport            `json:"edges,omitempty"`
	Walks       walkAudit              `json:"walks"`
	// walksLeft is how many stays were still walking when the wait for
	// the sagas ended, after walksSettled.
	walksLeft    int
	walksSettled time.Duration
}

// audit checks the run and fills in the report.
func (rep *report) audit(t *testing.T, ctx context.Context, s *stack, l *load, m mode) {
	t.Helper()
	ops := l.ops()
	rep.ByKind, rep.Final, rep.Codes, rep.Unknowns = map[string]counts{}, map[string]int{}, map[string]int{}, map[string]int{}
	for _, o := range ops {
		c := rep.ByKind[o.Kind]
		c.add(o)
		rep.ByKind[o.Kind] = c
		rep.Final[o.Final.String()]++
		if o.Final == outRejected || o.Final == outFailed {
			rep.Codes[fmt.Sprintf("%s %d %s", o.Kind, o.Status, o.Code)]++
		}
		if o.First == outUnknown {
			rep.Unknowns[o.Kind+" "+o.FirstAns]++
		}
		for i := range rep.Faults {
			f := &rep.Faults[i]
			if !o.Started.Before(f.Injected) && o.Started.Before(f.Healed) {
				f.Requests.add(o)
			}
		}
	}
	if secs := rep.LoadEnded.Sub(rep.LoadStarted).Seconds(); secs > 0 {
		rep.HoldRate = float64(rep.ByKind["hold"].Total) / secs
	}
	add := func(name string, ok bool, detail string) {
		rep.Checks = append(rep.Checks, check{Name: name, OK: ok, Detail: detail})
		if !ok {
			t.Errorf("%s: %s", name, detail)
		}
	}
	info := func(name, detail string) {
		rep.Checks = append(rep.Checks, check{Name: name, OK: true, Detail: detail, Info: true})
	}

	// The invariant, checked by `booking verify`'s code.
	res, err := verifyDB(ctx, s.db)
	if err != nil {
		add("booking verify", false, err.Error())
	} else {
		rep.Verify = res
		var lines []string
		for _, c := range res {
			rep.Violations += len(c.Violations)
			for _, v := range c.Violations {
				lines = append(lines, c.Name+": "+v.Partition+" "+v.Detail)
			}
		}
		add("booking verify", rep.Violations == 0, fmt.Sprintf("%d checks, %d violations %s", len(res), rep.Violations, strings.Join(first(lines, 5), "; ")))
	}

	// Every outcome against the database.
	a, err := auditBookings(ctx, s.db, l.snapshotChains())
	if err != nil {
		add("bookings audit", false, err.Error())
	} else {
		rep.Bookings = a
		add("every ok hold exists exactly once", a.Lost == 0 && a.Duplicated == 0 && a.Mismatched == 0,
			fmt.Sprintf("%d of %d ok holds exist once; lost %d, duplicated %d, mismatched %d %s", a.OKExactlyOnce,
				a.OKExactlyOnce+a.Lost+a.Mismatched, a.Lost, a.Duplicated, a.Mismatched, strings.Join(a.Examples, "; ")))
		add("every refused hold is absent", a.Phantom == 0, fmt.Sprintf("%d refused holds absent, %d exist", a.RefusedAbsent, a.Phantom))
		add("every booking is in the state its outcomes allow", a.WrongState == 0, fmt.Sprintf("%d in a wrong state", a.WrongState))
		info("unresolved unknown holds", fmt.Sprintf("%d exist, %d absent (either is correct: the client never learned)", a.UnresolvedExist, a.UnresolvedAbsent))
	}
	// Every clinic outcome against the database, as for hotels; and money:
	// a payment the webhook applied confirmed its appointment, a made-up
	// one confirmed nothing.
	if rep.Clinics > 0 {
		va, err := auditVisits(ctx, s.db, l.snapshotVisits())
		if err != nil {
			add("appointments audit", false, err.Error())
		} else {
			rep.Visits = va
			add("every ok appointment hold exists exactly once", va.Lost == 0 && va.Duplicated == 0 && va.Mismatched == 0,
				fmt.Sprintf("%d of %d ok holds exist once; lost %d, duplicated %d, mismatched %d %s", va.OKExactlyOnce,
					va.OKExactlyOnce+va.Lost+va.Mismatched, va.Lost, va.Duplicated, va.Mismatched, strings.Join(va.Examples, "; ")))
			add("every refused appointment hold is absent", va.Phantom == 0, fmt.Sprintf("%d refused holds absent (slot_taken …), %d exist", va.RefusedAbsent, va.Phantom))
			add("every appointment is in the state its outcomes allow", va.WrongState == 0, fmt.Sprintf("%d in a wrong state", va.WrongState))
			add("a paid appointment is confirmed, an unpaid confirm changes nothing", va.PaidNotConfirmed == 0 && va.UnpaidConfirmed == 0,
				fmt.Sprintf("%d paid but not confirmed, %d confirmed with a made-up payment; %d made-up payments refused with 402",
					va.PaidNotConfirmed, va.UnpaidConfirmed, va.Refused402))
			info("unresolved unknown appointment holds", fmt.Sprintf("%d exist, %d absent", va.UnresolvedExist, va.UnresolvedAbsent))
		}
	}
	// Walks: every arriving guest against the database.
	if wa, err := auditWalks(ctx, s.db, l.snapshotWalks()); err != nil {
		add("walks audit", false, err.Error())
	} else {
		wa.SettledIn = rep.walksSettled.Round(10 * time.Millisecond).String()
		for _, c := range l.snapshotWalks() {
			if c.Relocate == nil {
				continue
			}
			for _, f := range rep.Faults {
				if !c.Relocate.Started.Before(f.Injected) && c.Relocate.Started.Before(f.Healed) {
					wa.DuringFaults++
					break
				}
			}
		}
		rep.Walks = wa
		rep.addWalkChecks(add, info, wa, rep.walksLeft)
		if kw := faultNamed(rep.Faults, "kill-walk"); kw != nil {
			add("kill-walk caught walks mid-saga", len(s.caughtWalks) > 0, kw.Note)
		}
		if len(s.caughtWalks) > 0 {
			var walked, undone int
			err := dbtest.SQL(s.db).QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'walked'), count(*) FILTER (WHERE status = 'confirmed')
				FROM reservations WHERE reservation_id = ANY($1::UUID[])`, s.caughtWalks).Scan(&walked, &undone)
			if err != nil {
				add("walks caught by kill-walk", false, err.Error())
			} else {
				add("every walk caught by kill-walk ended walked or undone", walked+undone == len(s.caughtWalks),
					fmt.Sprintf("%d caught mid-saga: %d walked, %d undone, %d otherwise", len(s.caughtWalks), walked, undone,
						len(s.caughtWalks)-walked-undone))
			}
		}
	}
	unresolved := rep.Final[outUnknown.String()]
	var unknownFirst int
	for _, c := range rep.ByKind {
		unknownFirst += c.Unknown
	}
	add("every unknown outcome resolved by retrying its key", unresolved == 0, fmt.Sprintf("%d unresolved of %d unknown first attempts",
		unresolved, unknownFirst))

	// Events: no event lost or duplicated across the relay kills and the NATS restart.
	sa, err := auditStream(ctx, s.db, s.nats.addr(), "hotel", m.ConvergeIn)
	if err != nil {
		add("outbox and stream", false, err.Error())
	} else {
		rep.Stream = sa
		add("outbox drained", sa.Unsent == 0, fmt.Sprintf("%d of %d hotel events unsent after %s", sa.Unsent, sa.Outbox, sa.DrainedIn))
		add("no event lost or duplicated in the stream", sa.Missing == 0 && sa.Duplicates == 0,
			fmt.Sprintf("%d events, %d stream messages, %d missing, %d duplicated", sa.Outbox, sa.InStream, sa.Missing, sa.Duplicates))
	}
	if rep.Clinics > 0 {
		ca, err := auditStream(ctx, s.db, s.nats.addr(), "clinic", m.ConvergeIn)
		if err != nil {
			add("clinic outbox and stream", false, err.Error())
		} else {
			rep.ClinicEvts = ca
			add("clinic outbox drained", ca.Unsent == 0, fmt.Sprintf("%d of %d clinic events unsent after %s", ca.Unsent, ca.Outbox, ca.DrainedIn))
			add("no clinic event lost or duplicated in the stream", ca.Missing == 0 && ca.Duplicates == 0,
				fmt.Sprintf("%d events, %d stream messages, %d missing, %d duplicated", ca.Outbox, ca.InStream, ca.Missing, ca.Duplicates))
		}
	}

	// The read model converges.
	ok, took, last := readModelConvergence(ctx, s.bin, s.pg.url("berth"), m.ConvergeIn)
	rep.ReadModel = fmt.Sprintf("%s after %s", last, took.Round(100*time.Millisecond))
	dead := deadLetters(ctx, s.nats.addr())
	// A dependency outage never dead-letters a good event (transient
	// failures are retried for as long as they last), so the view must
	// converge in both the short and the long suite.
	add("read model converges (readmodel verify)", ok, rep.ReadModel)
	add("no read-model dead letters", dead == 0, fmt.Sprintf("%d event(s) dead-lettered by the read model", dead))
	rep.DeadLetters = dead

	if n, err := redisKeys(s.redis); err == nil {
		rep.RedisKeys = n
		if n == 0 {
			info("redis in use", "no keys in Redis after the run: no service caches there yet (BERTH_REDIS_URL not wired), so the Redis faults only prove they do no harm")
		} else {
			info("redis in use", fmt.Sprintf("%d keys cached", n))
		}
	}
	if rep.Edges != nil {
		for _, c := range rep.Edges.Checks {
			add(c.Name, c.OK, c.Detail)
		}
	}
	for _, f := range rep.Faults {
		add("progress after "+f.Name, f.Progress && f.TimeToSuccess <= progressBound, fmt.Sprintf("first successful hold %s after healing", fmtDur(f.TimeToSuccess, f.Progress)))
	}
	rep.Finished = time.Now().UTC()
}

// faultNamed returns the result of the fault called name (nil if none ran).
func faultNamed(fs []faultResult, name string) *faultResult {
	for i := range fs {
		if fs[i].Name == name {
			return &fs[i]
		}
	}
	return nil
}

func (l *load) snapshotChains() []*chain {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*chain(nil), l.chains...)
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func fmtDur(d time.Duration, ok bool) string {
	if !ok {
		return "none"
	}
	return d.Round(time.Millisecond).String()
}

// markdown renders the report.
func (rep *report) markdown() string {
	var b strings.Builder
	m := rep.Mode
	fmt.Fprintf(&b, "### Chaos run: %s (%s, commit %s)\n\n", m.Name, rep.Started.Format(time.RFC3339), rep.Commit)
	fmt.Fprintf(&b, "Load: %d workers, target %.0f holds/s (achieved %.1f/s), %d hotels in %s (one hot hotel of %d rooms per region, the others %d rooms) over %d nights; "+
		"%d%% of holds confirmed, %d%% cancelled; per-attempt timeout %s. Each fault lasted %s.\n\n",
		m.Load.Workers, m.Load.Rate, rep.HoldRate, rep.Hotels, strings.Join(rep.Regions, " + "), m.HotRooms, m.Rooms, m.Load.Window,
		m.Load.ConfirmPct, m.Load.CancelPct, m.Load.Timeout, m.FaultFor)
	if rep.Clinics > 0 {
		fmt.Fprintf(&b, "Clinic traffic: %d%% of the chains are patients, each with its own guest token, racing for the slots of %d clinics "+
			"(a doctor confirmed on the spot and a prepaid one, 08:00–12:00 in %d-minute slots on two days); a prepaid hold is paid through "+
			"the development provider (its webhook confirms) and confirmed with the intent, or confirmed with a made-up payment (402) and cancelled.\n\n",
			m.Load.ClinicPct, rep.Clinics, m.SlotMinutes)
	}
	b.WriteString("| fault | target | requests during fault | ok | rejected (409) | failed (4xx) | unknown | unknown resolved | first hold ok after heal | in read model after heal | note |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, f := range rep.Faults {
		c := f.Requests
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %s | %s | %s |\n", f.Name, f.Target, c.Total, c.OK, c.Rejected, c.Failed,
			c.Unknown, c.Resolved, fmtDur(f.TimeToSuccess, f.Progress), fmtDur(f.ReadModelLag, f.ReadModelLag > 0), f.Note)
	}
	b.WriteString("\n| request | total | ok | rejected (409) | failed (4xx) | unknown (1st attempt) | resolved by retry | retries |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range []string{"hold", "confirm", "cancel", "appt-hold", "appt-pay", "appt-confirm", "appt-cancel",
		"walk-hold", "walk-confirm", "check-in", "upgrade", "relocate"} {
		c, ok := rep.ByKind[k]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d |\n", k, c.Total, c.OK, c.Rejected, c.Failed, c.Unknown, c.Resolved, c.Retries)
	}
	fmt.Fprintf(&b, "\nFinal outcomes after retries: %v. Definite refusals: %v. Unknown first attempts: %v.\n\n", rep.Final, rep.Codes, rep.Unknowns)
	if e := rep.Edges; e != nil {
		fmt.Fprintf(&b, "Rate limiter and waiting room (%s):\n\n", e.Limit)
		b.WriteString("| stretch | reads | 429 | let through | failed open | bound | limit back after heal |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, st := range e.Stretch {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s |\n", st.Name, st.Reads, st.Refused, st.Admitted, st.FailOpen, st.Bound, st.BackIn)
		}
		fmt.Fprintf(&b, "\nWaiting room: %d tickets, %d admitted, %d lost to the flush; answers %v; holds with an access token %v.\n\n",
			e.Tickets, e.Admitted, e.Lost, e.Answers, e.Holds)
	}
	b.WriteString("| check | result | detail |\n|---|---|---|\n")
	for _, c := range rep.Checks {
		res := "pass"
		switch {
		case c.Info:
			res = "info"
		case !c.OK:
			res = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, res, cell(c.Detail))
	}
	fmt.Fprintf(&b, "\nInvariant violations: %d. Lost bookings: %d. Duplicated bookings: %d. Phantom bookings: %d.\n",
		rep.Violations, rep.Bookings.Lost, rep.Bookings.Duplicated, rep.Bookings.Phantom)
	if w := rep.Walks; w.Chains > 0 {
		fmt.Fprintf(&b, "Arrivals at overbooked hotels: %d chains, %d checked in, %d upgraded, %d relocated across regions (%d walked, %d undone); "+
			"settled in %s; not exactly one live stay %d, stuck walking %d, wrong walks %d, steps not written once %d.\n",
			w.Chains, w.CheckedIn, w.Upgraded, w.Relocating, w.Walked, w.Undone, w.SettledIn, w.NotOneLive, w.Stuck, w.BadWalk, w.BadEvents)
	}
	if rep.Clinics > 0 {
		v := rep.Visits
		fmt.Fprintf(&b, "Appointments (%d clinics): %d holds, %d ok and present once, %d refused and absent; lost %d, duplicated %d, phantom %d, wrong state %d; "+
			"paid but not confirmed %d, confirmed without payment %d (%d made-up payments refused with 402).\n",
			rep.Clinics, v.Holds, v.OKExactlyOnce, v.RefusedAbsent, v.Lost, v.Duplicated, v.Phantom, v.WrongState, v.PaidNotConfirmed, v.UnpaidConfirmed, v.Refused402)
	}
	return b.String()
}

// deadLetters counts the messages the read model's consumer parked
// (-1 when the stream cannot be read).
func deadLetters(ctx context.Context, natsAddr string) int64 {
	nc, err := nats.Connect("nats://"+natsAddr, nats.Timeout(5*time.Second))
	if err != nil {
		return -1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return -1
	}
	n, err := subjectCount(ctx, js, "berth.dlq.readmodel.>")
	if err != nil {
		return -1
	}
	return n
}

// cell makes text fit one markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "|", "/")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return strings.ReplaceAll(s, "\n", "<br>")
}

// gitCommit is the short hash of the checked-out commit ("" outside git).
func gitCommit() string {
	out, err := exec.Command("git", "-C", "../..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// write logs the report and saves it as JSON and markdown.
func (rep *report) write(t *testing.T, dir string) {
	t.Helper()
	rep.Commit = gitCommit()
	md := rep.markdown()
	t.Log("\n" + md)
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
	latest := filepath.Join(filepath.Dir(dir), "latest-"+rep.Mode.Name+".md")
	_ = os.WriteFile(latest, []byte(md), 0o644)
	t.Logf("report: %s", filepath.Join(dir, "report.md"))
}
