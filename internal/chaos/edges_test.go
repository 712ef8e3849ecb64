package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	// The fixed-offset zones below come from the embedded database.
	_ "time/tzdata"

	"github.com/google/uuid"
)

// The router's own defences under the same faults: its rate limiter and a
// clinic's waiting room, both kept in the region's Redis (so the Redis
// faults hit them head-on), driven through the router while the hotel and
// clinic load runs.
//
// The limiter: one client reads far faster than its budget allows. Where
// Redis can be asked, the limit holds — in any stretch of the run, what was
// let through is at most burst + rate × length, plus what the router let
// through unchecked (its fail_open counter on /metrics) — and 429s come
// back within progressBound of every fault healing. While Redis is failing
// the limiter fails open (docs/SECURITY.md): no 429 at all.
//
// The waiting room: patients keep joining a clinic's room (open since
// before the run, admitting edgeRate per second) and poll their tickets.
// Never more are admitted than the rate allows since the opening; a
// ticket's position never changes while its queue lives; tickets are first
// come, first served (one answered before another was asked comes first),
// on either side of the Redis flush, which loses the queue (its tickets are
// then 404: join again); every request gets an answer within the client
// timeout; an admitted patient's access token lets that patient hold and
// nobody else (428 waiting_room).

// Limits of the suite's router.
const (
	edgeLimitRate  = 5  // client_reads per second
	edgeLimitBurst = 5  // and its burst
	edgeProbeRate  = 25 // requests per second the limiter probe sends
	edgeRate       = 1  // waiting-room admissions per second
	edgeTimeout    = 5 * time.Second
	// faultMargin: requests started this long after a fault's injection
	// are judged as under the fault.
	faultMargin = 300 * time.Millisecond
)

// edges is the limiter probe and the waiting-room patients of one run.
type edges struct {
	s       *stack
	clinic  string
	doctor  string
	opens   time.Time
	from    time.Time // the doctor's slots: two days from here
	client  *http.Client
	metrics string // the router's /metrics

	mu       sync.Mutex
	waiting  int // patients joined and not yet admitted (or given up)
	final    *limitStretch
	reads    []probeRead
	samples  []failOpenSample
	tickets  []*ticketRec
	holds    []holdRec
	hangs    []string // waiting-room requests without an answer in time
	answers  map[string]int
	patients int
}

type probeRead struct {
	Start, End time.Time
	Status     int // 0: no answer
}

type failOpenSample struct {
	At       time.Time
	FailOpen int64
}

// ticketRec is one ticket as its patient saw it.
type ticketRec struct {
	Guest      string
	Start, End time.Time // of the request that got it (first attempt to answer)
	Position   int64
	Moved      []int64 // other positions a poll reported while it lived
	Lost       bool    // a poll answered 404: the queue was lost
	AdmittedAt time.Time
	Access     string
}

type holdRec struct {
	Own    bool // the patient's own token (else another guest's, with the patient's access token)
	Status int
	Code   string
}

// startEdges creates the waiting-room clinic, configures the router's rate
// limits and the room (and the gate of the clinic's booking service), and
// restarts both with it.
func (s *stack) startEdges(t *testing.T, day time.Time) *edges {
	t.Helper()
	region := s.regions[len(s.regions)-1] // not the region kill-booking kills
	base := s.urls[region]
	c := s.adminCall(t, "POST", base+"/v1/clinics", map[string]any{"name": "Chaos opening", "timezone": "UTC", "home_region": region})
	e := &edges{s: s, clinic: c["clinic_id"].(string), from: day, client: &http.Client{Timeout: edgeTimeout},
		metrics: s.routerURL + "/metrics", answers: map[string]int{}}
	weekly := []map[string]any{}
	for d := 1; d <= 7; d++ {
		weekly = append(weekly, map[string]any{"weekday": d, "start": "08:00", "end": "18:00"})
	}
	e.doctor = s.adminCall(t, "POST", base+"/v1/clinics/"+e.clinic+"/doctors",
		map[string]any{"name": "Dr. Opening", "slot_minutes": 10, "prepay_required": false, "weekly": weekly})["doctor_id"].(string)
	s.adminCall(t, "POST", base+"/v1/clinics/"+e.clinic+"/slots/materialize",
		map[string]any{"from": day.Format(time.DateOnly), "to": day.AddDate(0, 0, 2).Format(time.DateOnly)})

	// A window that opened at the start of this minute and lasts the run,
	// in a zone where it is mid-day (so it never crosses midnight).
	loc := midDayZone(t)
	now := time.Now().In(loc)
	e.opens = now.Truncate(time.Minute)
	windows := fmt.Sprintf(`[{"clinic_id":%q,"timezone":%q,"start":%q,"opens_at":%q,"end":%q,"admit_per_second":%d}]`,
		e.clinic, loc.String(), now.Add(-10*time.Minute).Format("15:04"), e.opens.Format("15:04"), now.Add(time.Hour).Format("15:04"), edgeRate)
	room := []string{"BERTH_WAITING_ROOMS=" + windows, "BERTH_WAITING_ROOM_KEYS=k1:" + strings.Repeat("5a", 32)}
	rt := s.router
	rt.env = append(rt.env, append([]string{fmt.Sprintf("BERTH_RATE_LIMITS=client_reads=%d/s:%d", edgeLimitRate, edgeLimitBurst)}, room...)...)
	bk := s.booking[region]
	bk.env = append(bk.env, room...)
	for _, p := range []*proc{rt, bk} {
		p.kill()
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*proc{rt, bk} {
		if err := p.waitReady(90 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// midDayZone returns a fixed-offset zone where it is now between 08:00 and
// 16:59.
func midDayZone(t *testing.T) *time.Location {
	t.Helper()
	for off := -12; off <= 12; off++ {
		loc, err := time.LoadLocation("Etc/GMT" + fmt.Sprintf("%+d", off))
		if err != nil {
			t.Fatal(err)
		}
		if h := time.Now().In(loc).Hour(); h >= 8 && h <= 16 {
			return loc
		}
	}
	t.Fatal("no zone where it is mid-day")
	return nil
}

// maxWaiting caps the patients waiting at once, so the room's traffic
// stays the same however long the run.
const maxWaiting = 15

// run drives the limiter probe and the metrics sampler until probes ends,
// and the patients until patients ends.
func (e *edges) run(probes, patients context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { e.probeLimiter(probes) })
	wg.Go(func() { e.sampleMetrics(probes) })
	wg.Go(func() {
		// A patient joins every 750 ms, a third faster than the room
		// admits: there is always someone waiting, never a crowd.
		tick := time.NewTicker(750 * time.Millisecond)
		defer tick.Stop()
		var pw sync.WaitGroup
		for {
			select {
			case <-patients.Done():
				pw.Wait()
				return
			case <-tick.C:
				e.mu.Lock()
				full := e.waiting >= maxWaiting
				if !full {
					e.waiting++
				}
				e.mu.Unlock()
				if !full {
					pw.Go(func() {
						defer func() { e.mu.Lock(); e.waiting--; e.mu.Unlock() }()
						e.patient(patients)
					})
				}
			}
		}
	})
	wg.Wait()
}

// probeLimiter reads as one client at edgeProbeRate. The path is the
// waiting room's ticket status with a malformed ticket: the limiter decides
// first, then the router answers 400 itself — no booking service, no Redis.
func (e *edges) probeLimiter(ctx context.Context) {
	token := e.s.mint("chaos-rl-probe")
	url := e.s.routerURL + "/v1/clinics/" + e.clinic + "/waiting-room/tickets/x"
	tick := time.NewTicker(time.Second / edgeProbeRate)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		wg.Go(func() {
			r := probeRead{Start: time.Now()}
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			if resp, err := e.client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				r.Status = resp.StatusCode
			}
			r.End = time.Now()
			e.mu.Lock()
			e.reads = append(e.reads, r)
			e.mu.Unlock()
		})
	}
}

// sampleMetrics reads the router's fail_open counter every 200 ms.
func (e *edges) sampleMetrics(ctx context.Context) {
	for {
		if n, err := e.failOpen(); err == nil {
			e.mu.Lock()
			e.samples = append(e.samples, failOpenSample{At: time.Now(), FailOpen: n})
			e.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (e *edges) failOpen() (int64, error) {
	resp, err := e.client.Get(e.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `berth_ratelimit_decisions_total{decision="fail_open"} `); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no fail_open counter on /metrics")
}

// call sends one request to the router as guest and returns the status and
// body (status 0: no answer within the client timeout, which is recorded).
func (e *edges) call(method, path, token string, header map[string]string, body any) (int, map[string]any) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.s.routerURL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, map[string]any{"error": err.Error()}
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// patient joins the room, polls until admitted (joining again when the
// queue was lost), then tries its access token with another guest's token
// (it must be refused) and holds with its own.
func (e *edges) patient(ctx context.Context) {
	e.mu.Lock()
	e.patients++
	n := e.patients
	e.mu.Unlock()
	guest := fmt.Sprintf("chaos-wr-%d-%s", n, uuid.NewString()[:8])
	token := e.s.mint(guest)
	room := "/v1/clinics/" + e.clinic + "/waiting-room/tickets"
	note := func(what string, status int, m map[string]any) {
		code, _ := m["code"].(string)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.answers[strings.TrimSpace(fmt.Sprintf("%s %d %s", what, status, code))]++
		if status == 0 {
			e.hangs = append(e.hangs, fmt.Sprintf("%s of %s at %s: %v", what, guest, time.Now().Format("15:04:05.000"), m["error"]))
		}
	}
	var (
		tk    *ticketRec
		start time.Time // of the first try to join: the ticket is made after it
	)
	for ctx.Err() == nil {
		if tk == nil {
			if start.IsZero() {
				start = time.Now()
			}
			status, m := e.call(http.MethodPost, room, token, nil, nil)
			note("join", status, m)
			if status != http.StatusCreated {
				sleepCtx(ctx, 500*time.Millisecond)
				continue
			}
			pos, _ := m["position"].(float64)
			tk = &ticketRec{Guest: guest, Start: start, End: time.Now(), Position: int64(pos)}
			e.mu.Lock()
			e.tickets = append(e.tickets, tk)
			e.mu.Unlock()
			tk.Access, _ = m["ticket"].(string) // the ticket, until it is admitted
			start = time.Time{}
		}
		sleepCtx(ctx, time.Second)
		status, m := e.call(http.MethodGet, room+"/"+tk.Access, token, nil, nil)
		note("status", status, m)
		switch status {
		case http.StatusOK:
			if pos, _ := m["position"].(float64); int64(pos) != tk.Position {
				e.mu.Lock()
				tk.Moved = append(tk.Moved, int64(pos))
				e.mu.Unlock()
			}
			if m["admitted"] == true {
				e.mu.Lock()
				tk.AdmittedAt = time.Now()
				tk.Access, _ = m["access_token"].(string)
				e.mu.Unlock()
				e.book(guest, token, tk.Access)
				return
			}
		case http.StatusNotFound:
			e.mu.Lock()
			tk.Lost = true
			e.mu.Unlock()
			tk = nil // join again
		}
	}
}

// book tries the access token with another guest's token, then holds with
// the patient's own; each is tried until it gets a definite answer.
func (e *edges) book(guest, token, access string) {
	thief := "chaos-wr-thief-" + uuid.NewString()[:8]
	for _, try := range []struct {
		own         bool
		guest, with string
	}{{false, thief, e.s.mint(thief)}, {true, guest, token}} {
		body := map[string]any{"guest_id": try.guest, "doctor_id": e.doctor,
			"window_start": e.from.Format(time.RFC3339), "window_end": e.from.AddDate(0, 0, 2).Format(time.RFC3339)}
		key := uuid.NewString()
		for attempt := 0; attempt < 20; attempt++ {
			status, m := e.call(http.MethodPost, "/v1/clinics/"+e.clinic+"/appointments", try.with,
				map[string]string{"Berth-Access-Token": access, "Idempotency-Key": key}, body)
			code, _ := m["code"].(string)
			e.mu.Lock()
			e.holds = append(e.holds, holdRec{Own: try.own, Status: status, Code: code})
			e.mu.Unlock()
			if status != 0 && status < 500 && code != "idempotency_in_progress" {
				break
			}
			time.Sleep(time.Second)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// finalWindow runs once the load and the patients have stopped and every
// fault is healed: it waits (up to within) for the limiter to refuse a read
// again, then watches it for length — the limit enforced after recovery.
func (e *edges) finalWindow(within, length time.Duration) {
	from := time.Now()
	deadline := from.Add(within)
	var back time.Time
	for back.IsZero() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		e.mu.Lock()
		for _, r := range e.reads {
			if r.Status == http.StatusTooManyRequests && r.Start.After(from) {
				back = r.End
				break
			}
		}
		e.mu.Unlock()
	}
	ls := &limitStretch{Name: "after the faults, load stopped", BackIn: "never"}
	if !back.IsZero() {
		ls.BackIn = back.Sub(from).Round(time.Millisecond).String()
		time.Sleep(length + 300*time.Millisecond) // and one more metrics sample
		ls.from, ls.to = back, back.Add(length)
	}
	e.mu.Lock()
	e.final = ls
	e.mu.Unlock()
}

// edgeReport is what the run learned about the limiter and the room.
type edgeReport struct {
	Limit    string         `json:"limit"`
	Stretch  []limitStretch `json:"limiter"`
	Tickets  int            `json:"tickets"`
	Admitted int            `json:"admitted"`
	Lost     int            `json:"lost_to_flush"`
	Answers  map[string]int `json:"answers"`
	Holds    map[string]int `json:"holds"`
	Checks   []check        `json:"checks"`
}

// limitStretch is the limiter's record over one stretch of the run.
type limitStretch struct {
	Name     string `json:"name"`
	Reads    int    `json:"reads"`
	Refused  int    `json:"refused_429"`
	Admitted int    `json:"admitted"`
	FailOpen int64  `json:"fail_open"`
	Bound    int64  `json:"bound"` // at most this many admitted where Redis decides
	Fault    bool   `json:"under_fault"`
	BackIn   string `json:"limit_back_in,omitempty"`
	from, to time.Time
}

// audit checks the limiter and the room against the faults of the run.
func (e *edges) audit(faults []faultResult) edgeReport {
	e.mu.Lock()
	defer e.mu.Unlock()
	rep := edgeReport{Limit: fmt.Sprintf("client_reads=%d/s:%d, probe %d/s; room admitting %d/s", edgeLimitRate, edgeLimitBurst, edgeProbeRate, edgeRate),
		Answers: e.answers, Holds: map[string]int{}}
	add := func(name string, ok bool, detail string) {
		rep.Checks = append(rep.Checks, check{Name: name, OK: ok, Detail: detail})
	}

	// The limiter, stretch by stretch: each fault from its injection to its
	// healing, and the healthy stretch after it up to the next injection.
	failOpenIn := func(a, b time.Time) int64 {
		// The last sample at or before a and the first at or after b
		// bracket every fail-open decision in [a, b].
		var lo, hi int64 = 0, -1
		for _, s := range e.samples {
			if !s.At.After(a) {
				lo = s.FailOpen
			}
			if !s.At.Before(b) && hi < 0 {
				hi = s.FailOpen
			}
		}
		if hi < 0 {
			return math.MaxInt32 // not bracketed: no bound
		}
		return hi - lo
	}
	// The run's last stretch ends with the last sample of the counter.
	end := time.Now()
	if n := len(e.samples); n > 0 {
		end = e.samples[n-1].At
	}
	measure := func(ls *limitStretch, a, b time.Time, bursts int64) {
		for _, r := range e.reads {
			if r.Start.Before(a) || r.End.After(b) {
				continue
			}
			ls.Reads++
			if r.Status == http.StatusTooManyRequests {
				ls.Refused++
			} else {
				ls.Admitted++
			}
		}
		ls.FailOpen = failOpenIn(a, b)
		ls.Bound = bursts*edgeLimitBurst + int64(math.Ceil(b.Sub(a).Seconds()*edgeLimitRate)) + ls.FailOpen
	}
	var bad, noFailOpen []string
	for i, f := range faults {
		next := end
		if i+1 < len(faults) {
			next = faults[i+1].Injected
		}
		redisToxic := strings.HasPrefix(f.Name, "redis-") && f.Name != "redis-flush"
		for _, st := range []struct {
			name  string
			a, b  time.Time
			fault bool
		}{{f.Name, f.Injected.Add(faultMargin), f.Healed, true}, {"after " + f.Name, f.Healed, next, false}} {
			ls := limitStretch{Name: st.name, Fault: st.fault}
			if !st.b.After(st.a) {
				continue
			}
			bursts := int64(1)
			if f.Name == "redis-flush" { // the flush forgets every budget once
				bursts = 2
			}
			measure(&ls, st.a, st.b, bursts)
			if int64(ls.Admitted) > ls.Bound {
				bad = append(bad, fmt.Sprintf("%s: %d admitted in %s, bound %d (%d failed open)", st.name, ls.Admitted, st.b.Sub(st.a).Round(time.Millisecond), ls.Bound, ls.FailOpen))
			}
			// Under a Redis fault nothing is refused, and what passed went
			// through the fail-open path (the fault did reach the limiter).
			if st.fault && redisToxic && (ls.Refused > 0 || ls.Reads > 0 && ls.FailOpen == 0) {
				noFailOpen = append(noFailOpen, fmt.Sprintf("%s: %d refused of %d, %d failed open", st.name, ls.Refused, ls.Reads, ls.FailOpen))
			}
			if !st.fault {
				// Reported, not asserted: how soon the limiter asked Redis
				// again depends on how loaded the machine is (it fails open
				// whenever a Redis round trip exceeds 50 ms).
				ls.BackIn = "—"
				for _, r := range e.reads {
					if r.Status == http.StatusTooManyRequests && r.Start.After(st.a) && r.End.Before(st.b) {
						ls.BackIn = r.End.Sub(st.a).Round(time.Millisecond).String()
						break
					}
				}
			}
			rep.Stretch = append(rep.Stretch, ls)
		}
	}
	add("rate limit holds wherever Redis decides", len(bad) == 0,
		fmt.Sprintf("in every stretch admitted ≤ burst + rate × length + fail-opens (the router's counter); violations: %v", bad))
	add("rate limiter fails open while Redis fails", len(noFailOpen) == 0,
		fmt.Sprintf("no 429 under redis-latency, redis-reset, redis-timeout; violations: %v", noFailOpen))
	// After every fault healed and the load stopped: 429s again, and no more
	// let through than the limit allows.
	if fw := e.final; fw == nil || fw.from.IsZero() {
		add("rate limit enforced again after the faults", false, "no 429 within 2 min after the load stopped")
	} else {
		measure(fw, fw.from, fw.to, 1)
		rep.Stretch = append(rep.Stretch, *fw)
		add("rate limit enforced again after the faults", fw.Refused > 0 && int64(fw.Admitted) <= fw.Bound,
			fmt.Sprintf("first 429 %s after the load stopped; then in %s: %d reads, %d refused, %d let through, bound %d (%d failed open)",
				fw.BackIn, fw.to.Sub(fw.from), fw.Reads, fw.Refused, fw.Admitted, fw.Bound, fw.FailOpen))
	}

	// The room.
	rep.Tickets = len(e.tickets)
	var admitted []time.Time
	var moved []string
	for _, tk := range e.tickets {
		if !tk.AdmittedAt.IsZero() {
			admitted = append(admitted, tk.AdmittedAt)
		}
		if tk.Lost {
			rep.Lost++
		}
		if len(tk.Moved) > 0 {
			moved = append(moved, fmt.Sprintf("%s: %d then %v", tk.Guest, tk.Position, tk.Moved))
		}
	}
	rep.Admitted = len(admitted)
	// Admitted by t is at most rate × (t − opens): every admission seen by
	// time t counted against what the rate allows by then.
	slices.SortFunc(admitted, func(a, b time.Time) int { return a.Compare(b) })
	var over []string
	for i, at := range admitted {
		if allow := int(math.Floor(at.Sub(e.opens).Seconds() * edgeRate)); i+1 > allow {
			over = append(over, fmt.Sprintf("%d admitted by %s, the rate allows %d", i+1, at.Format("15:04:05.000"), allow))
		}
	}
	add("waiting room admits no more than its rate", len(over) == 0 && rep.Admitted > 0,
		fmt.Sprintf("%d of %d tickets admitted at %d/s since %s; violations: %v", rep.Admitted, rep.Tickets, edgeRate, e.opens.UTC().Format("15:04:05"), first(over, 3)))
	add("a ticket keeps its position while its queue lives", len(moved) == 0, fmt.Sprintf("moved: %v", first(moved, 3)))

	// First come, first served: a ticket answered before another was asked
	// for has the lower position — unless the flush lost the queue between
	// them. The flush took effect at some instant between its injection
	// began and returned (dialling Redis, FLUSHALL; a fault without a heal is
	// "healed" as its injection returns), not at the injection's start: a
	// ticket whose request overlaps that span may have been answered by
	// either queue, and is compared with none.
	var flushFrom, flushTo time.Time
	for _, f := range faults {
		if f.Name == "redis-flush" {
			flushFrom, flushTo = f.Injected, f.Healed
		}
	}
	side := func(tk *ticketRec) int {
		switch {
		case flushFrom.IsZero() || tk.End.Before(flushFrom):
			return 0
		case tk.Start.After(flushTo):
			return 1
		}
		return -1 // its request overlaps the flush
	}
	var pairs, inversions int
	var inv []string
	for _, a := range e.tickets {
		for _, b := range e.tickets {
			if a == b || !a.End.Before(b.Start) || side(a) < 0 || side(a) != side(b) {
				continue
			}
			pairs++
			if a.Position >= b.Position {
				inversions++
				inv = append(inv, fmt.Sprintf("%s (%d, answered %s) before %s (%d, asked %s)", a.Guest, a.Position,
					a.End.Format("15:04:05.000"), b.Guest, b.Position, b.Start.Format("15:04:05.000")))
			}
		}
	}
	add("waiting room is first come, first served across the faults", inversions == 0 && pairs > 0,
		fmt.Sprintf("%d ordered pairs of tickets, %d out of order %v; %d tickets lost to the flush (404, joined again)", pairs, inversions, first(inv, 3), rep.Lost))
	add("no waiting-room request hangs", len(e.hangs) == 0,
		fmt.Sprintf("every ticket and status request answered within %s; without an answer: %v", edgeTimeout, first(e.hangs, 3)))

	// Access tokens: another guest's hold with it is refused, the patient's own is not.
	var stolen, refused, own428, ownOK int
	for _, h := range e.holds {
		rep.Holds[fmt.Sprintf("own=%v %d %s", h.Own, h.Status, h.Code)]++
		switch {
		case !h.Own && h.Status >= 200 && h.Status < 300:
			stolen++
		case !h.Own && h.Status == http.StatusPreconditionRequired:
			refused++
		case h.Own && h.Status == http.StatusPreconditionRequired:
			own428++
		case h.Own && h.Status == http.StatusCreated:
			ownOK++
		}
	}
	add("an access token admits only its own guest", stolen == 0 && refused > 0 && own428 == 0 && ownOK > 0,
		fmt.Sprintf("another guest with it: %d refused 428, %d let through; the guest's own: %d held, %d refused 428", refused, stolen, ownOK, own428))
	return rep
}
