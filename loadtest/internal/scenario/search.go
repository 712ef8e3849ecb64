package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/berthhq/berth/loadtest/internal/seed"
	"github.com/google/uuid"
)

// Search is the search scenario: a searchable catalog seeded in bulk, the
// regional indexes rebuilt from it (build time and memory), searches of a
// realistic mix at rising open-loop rates until p99 misses its objective
// (the highest rate that held it), and the lag from a catalog change to
// the change being found.
type Search struct {
	Hotels, RoomTypes, Nights, Rooms int
	// NoSeed reuses a catalog seeded before (with --searchable and the same
	// number of hotels) instead of seeding one.
	NoSeed bool
	// NoRebuild searches the indexes as they are (after an earlier run
	// built them): no build time or memory figures.
	NoRebuild bool
	// Indexes are the booking services whose search indexes are rebuilt
	// after the seed and whose /metrics give their memory (every replica
	// holds its own index). Empty: the entry points (a router passes the
	// rebuild to its region's booking service; its /metrics are its own).
	Indexes client.Targets
	// Rates are the open-loop arrival rates tried, in order, for Step
	// each; the run stops at the first rate whose search p99 reaches
	// P99Ms or whose error rate passes MaxErrorRate.
	Rates        []float64
	Step         time.Duration
	P99Ms        float64
	MaxErrorRate float64
	// LagSamples hotels are created, then renamed, one at a time; each is
	// searched for until found.
	LagSamples int
	Workers    int
}

// The kinds of search in the mix, with their shares (in percent).
var searchKinds = []struct {
	name  string
	share int
}{
	{"text_typo", 25}, // name words and city with one or two typos
	{"exonym", 10},    // the city's English name, dates and guests
	{"city_dates", 15},
	{"near", 15}, // a point, a radius, sort by distance
	{"price", 10},
	{"amenities", 10},
	{"paging", 15}, // a page, then the next one with its cursor
}

// searchMix draws the queries of the scenario from the seeded catalog.
type searchMix struct {
	e      *Env
	hotels int
	nights int
	// found counts, per kind, searches answered 200 and those of them
	// with at least one hotel: a mix that finds nothing measures nothing.
	mu    sync.Mutex
	found map[string]*[2]atomic.Int64
}

func (m *searchMix) count(kind string, hotels int) {
	m.mu.Lock()
	c := m.found[kind]
	if c == nil {
		c = &[2]atomic.Int64{}
		m.found[kind] = c
	}
	m.mu.Unlock()
	c[0].Add(1)
	if hotels > 0 {
		c[1].Add(1)
	}
}

type searchPage struct {
	Hotels []struct {
		ID string `json:"hotel_id"`
	} `json:"hotels"`
	NextCursor *string `json:"next_cursor"`
}

// get sends one search and returns its outcome and page.
func (m *searchMix) get(ctx context.Context, region string, v url.Values) (string, searchPage) {
	resp, err := m.e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodGet, Path: "/v1/hotels?" + v.Encode()})
	var p searchPage
	if err == nil && resp.Status == http.StatusOK {
		if derr := resp.Decode(&p); derr != nil {
			return "bad_body", p
		}
	}
	return client.Outcome(resp, err), p
}

func (m *searchMix) kind() string {
	n := rand.IntN(100)
	for _, k := range searchKinds {
		if n < k.share {
			return k.name
		}
		n -= k.share
	}
	return searchKinds[0].name
}

// stay returns a stay of 1–3 nights inside the seeded nights.
func (m *searchMix) stay(v url.Values) {
	in := 1 + rand.IntN(max(m.nights-4, 1))
	v.Set("check_in", day(in))
	v.Set("check_out", day(in+1+rand.IntN(3)))
}

// cityWord is what a traveller types for a city: its English name when it
// has one (half the time), else its local name, lower case, often without
// its accents.
func cityWord(c seed.City) string {
	if c.Exonym != "" && rand.IntN(2) == 0 {
		return strings.ToLower(c.Exonym)
	}
	return strings.ToLower(c.Name)
}

// query builds one search of the given kind.
func (m *searchMix) query(kind string) url.Values {
	i := rand.IntN(m.hotels)
	h := seed.SearchHotel(i)
	c := seed.Cities[i%len(seed.Cities)]
	v := url.Values{}
	switch kind {
	case "text_typo":
		words := strings.Fields(h.Name)
		w := words[rand.IntN(len(words))]
		if strings.EqualFold(w, "hotel") || len(w) < 4 {
			w = words[0]
		}
		q := typo(w) + " " + cityWord(c)
		if rand.IntN(3) == 0 {
			q = w + " " + typo(cityWord(c))
		}
		v.Set("q", q)
	case "exonym":
		name := c.Exonym
		if name == "" {
			name = c.Name
		}
		v.Set("q", strings.ToLower(name))
		m.stay(v)
		v.Set("guests", "2")
	case "city_dates":
		v.Set("city", strings.ToLower(c.Name))
		m.stay(v)
		v.Set("guests", strconv.Itoa(1+rand.IntN(4)))
	case "near":
		v.Set("near", fmt.Sprintf("%.4f,%.4f", c.Lat+(rand.Float64()-0.5)*0.06, c.Lon+(rand.Float64()-0.5)*0.08))
		v.Set("radius_km", strconv.Itoa(2+rand.IntN(4)))
		v.Set("sort", "distance")
		if rand.IntN(2) == 0 {
			m.stay(v)
		}
	case "price":
		v.Set("q", cityWord(c))
		v.Set("sort", "price")
		v.Set("max_price_cents", strconv.Itoa(8000+2000*rand.IntN(6)))
		m.stay(v)
	case "amenities":
		v.Set("city", c.Name)
		v.Set("amenities", pick([]string{"wifi", "pool", "spa", "gym,parking", "breakfast,wifi", "pets"}))
	case "paging":
		v.Set("q", cityWord(c))
		v.Set("limit", "20")
	}
	return v
}

// typo makes one or two edits to w, within what the index forgives: it
// allows one edit in a word of 3–5 letters and two in a longer one,
// counted on the word as typed, so two edits only in words of eight
// letters or more (two letters left out still leave six). The index
// forgives per word, so a name of several words ("new york", "frankfurt
// am main") gets its edits in its longest word, never across a space.
func typo(w string) string {
	words := strings.Fields(strings.ToLower(w))
	if len(words) == 0 {
		return ""
	}
	longest := 0
	for i, x := range words {
		if len([]rune(x)) > len([]rune(words[longest])) {
			longest = i
		}
	}
	words[longest] = typoWord(words[longest])
	return strings.Join(words, " ")
}

// typoWord makes one or two edits to the one word w (lower case).
func typoWord(w string) string {
	r := []rune(w)
	if len(r) < 4 {
		return string(r)
	}
	edits := 1
	if len(r) >= 8 && rand.IntN(2) == 0 {
		edits = 2
	}
	orig := string(r)
	for {
		t := slices.Clone(r)
		for range edits {
			k := 1 + rand.IntN(len(t)-1) // the first letter is rarely wrong
			switch rand.IntN(3) {
			case 0: // a letter left out
				t = slices.Delete(t, k, k+1)
			case 1: // a letter doubled
				t = slices.Insert(t, k, t[k])
			default: // another letter
				t[k] = 'a' + (t[k]-'a'+1+rune(rand.IntN(2)))%26
			}
		}
		// Two edits may undo each other: draw again.
		if s := string(t); s != orig {
			return s
		}
	}
}

// task is one arrival: a user's search, or two for a user who pages on.
func (m *searchMix) task(ctx context.Context, s *engine.Session) {
	region := pick(m.e.Client.Targets.Regions)
	kind := m.kind()
	v := m.query(kind)
	var page searchPage
	s.Measure("search", func() string {
		var out string
		out, page = m.get(ctx, region, v)
		if out == "ok" {
			m.count(kind, len(page.Hotels))
		}
		return out
	})
	if kind == "paging" && page.NextCursor != nil {
		v.Set("cursor", *page.NextCursor)
		s.Measure("search", func() string {
			out, next := m.get(ctx, region, v)
			if out == "ok" {
				m.count("paging_next", len(next.Hotels))
			}
			return out
		})
	}
}

// StepResult is one rate of the search scenario.
type StepResult struct {
	Rate      float64         `json:"rate_per_s"`
	Search    engine.OpStats  `json:"search"`
	Load1     float64         `json:"load_average_1m"`
	Dropped   int64           `json:"dropped"`
	Held      bool            `json:"held"` // p99 under the objective, errors under the limit
	Timeline  []engine.Second `json:"-"`
	ErrorRate float64         `json:"error_rate"`
	// The shares of the step's searches the booking services answered
	// within 25 and 100 ms, from their own request histograms (what the
	// index and the service took, without the router, the network and
	// the generator): 0 when their /metrics do not say.
	ServedWithin25ms, ServedWithin100ms float64
}

// RunSearch seeds, indexes, steps the rate and measures the lag.
func (e *Env) RunSearch(ctx context.Context, o Search) (*report.Report, error) {
	if len(o.Rates) == 0 || o.Step <= 0 || o.P99Ms <= 0 || o.Hotels < 1 {
		return nil, errors.New("search: rates, step, p99 and hotels are required")
	}
	cfg := map[string]any{"hotels": o.Hotels, "room_types": o.RoomTypes, "nights": o.Nights, "rooms": o.Rooms,
		"rates_per_s": o.Rates, "step": o.Step.String(), "p99_ms": o.P99Ms, "max_error_rate": o.MaxErrorRate,
		"lag_samples": o.LagSamples, "workers": o.Workers, "seeded": !o.NoSeed, "rebuilt": !o.NoRebuild}
	r := e.newReport("search", cfg)
	if len(o.Indexes.Regions) == 0 {
		o.Indexes = e.Client.Targets
	}

	// 1. The catalog.
	if !o.NoSeed {
		if e.DB == nil {
			return nil, errors.New("search: seeding needs the database (--db or BERTH_DATABASE_URL)")
		}
		e.logf("search: seeding %d searchable hotels × %d room types × %d nights …", o.Hotels, o.RoomTypes, o.Nights)
		so := seed.Options{Hotels: o.Hotels, RoomTypes: o.RoomTypes, Nights: o.Nights, Rooms: o.Rooms,
			Regions: e.Client.Targets.Regions, Workers: 2, Chunk: 500, Searchable: true}
		if !e.Quiet {
			so.Progress = e.Log
		}
		res, err := seed.Hotels(ctx, e.DB, so)
		if err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
		r.Figures["seed_s"] = res.Seconds
		r.Figures["seed_hotels_per_s"] = float64(res.Rows["hotels"]) / res.Seconds
		e.logf("search: seeded %d hotels, %d nights in %.1f s", res.Rows["hotels"], res.Rows["room_inventory"], res.Seconds)
	}

	// 2. The indexes: rebuilt from the catalog the seed wrote behind the
	// events' back (COPY writes no outbox), then measured.
	mix := &searchMix{e: e, hotels: o.Hotels, nights: o.Nights, found: map[string]*[2]atomic.Int64{}}
	if err := e.buildIndexes(ctx, r, o, mix); err != nil {
		return nil, err
	}
	clear(mix.found) // the warm-up's searches are not the measured ones

	// 3. Rising rates.
	var steps []StepResult
	best := -1
	offset := 0
	for _, rate := range o.Rates {
		if ctx.Err() != nil {
			break
		}
		rec := engine.NewRecorder()
		ecfg := engine.Config{Rate: rate, Duration: o.Step, Workers: o.Workers, Grace: 10 * time.Second}
		if !e.Quiet {
			ecfg.Progress = e.Log
			ecfg.Status = func() string { return fmt.Sprintf("step %.0f/s", rate) }
		}
		e.logf("search: %.0f searches/s for %s …", rate, o.Step)
		served := e.servedWithin(ctx, o.Indexes, nil)
		res := engine.Run(ctx, ecfg, rec, mix.task)
		served = e.servedWithin(ctx, o.Indexes, served)
		st := StepResult{Rate: rate, Search: rec.Ops(res.Elapsed)["search"], Load1: loadAverage(), Dropped: res.Dropped, Timeline: rec.Timeline()}
		st.ErrorRate = report.ErrorRate(st.Search)
		st.Held = st.Search.Count > 0 && st.Search.P99Ms < o.P99Ms && st.ErrorRate <= o.MaxErrorRate && res.Dropped == 0
		steps = append(steps, st)
		for _, s := range st.Timeline {
			s.T += offset
			r.Timeline = append(r.Timeline, s)
		}
		offset += int(res.Elapsed.Round(time.Second) / time.Second)
		key := "step_" + strconv.FormatFloat(rate, 'f', -1, 64)
		inService := ""
		if n := served["+Inf"]; n > 0 {
			st.ServedWithin100ms, st.ServedWithin25ms = served["0.1"]/n, served["0.025"]/n
			r.Figures[key+"_served_within_100ms"], r.Figures[key+"_served_within_25ms"] = st.ServedWithin100ms, st.ServedWithin25ms
			inService = fmt.Sprintf("; the booking service answered %.1f%% within 25 ms, %.1f%% within 100 ms", 100*st.ServedWithin25ms, 100*st.ServedWithin100ms)
		}
		e.logf("search: %6.0f/s offered, %6.1f/s done: p50 %.1f ms, p99 %.1f ms, errors %.2f%%, load %.1f → %s%s",
			rate, st.Search.Throughput, st.Search.P50Ms, st.Search.P99Ms, 100*st.ErrorRate, st.Load1, heldWord(st.Held), inService)
		r.Figures[key+"_p99_ms"], r.Figures[key+"_p50_ms"] = st.Search.P99Ms, st.Search.P50Ms
		r.Figures[key+"_done_per_s"], r.Figures[key+"_load_1m"] = st.Search.Throughput, st.Load1
		if !st.Held {
			if best < 0 && len(steps) == 1 {
				r.Engine = res // the lowest rate's, to show what missed
			}
			// On a shared machine one stall decides the p99 of a short
			// step, so a near miss does not end the run: a higher rate may
			// still hold. Errors, drops or a p99 far past the objective do.
			if st.ErrorRate > o.MaxErrorRate || res.Dropped > 0 || st.Search.P99Ms > 3*o.P99Ms {
				break
			}
			continue
		}
		best = len(steps) - 1
		r.Ops = rec.Ops(res.Elapsed)
		r.Engine = res
	}
	r.Notes = append(r.Notes, stepTable(steps, o.P99Ms))
	if best >= 0 {
		b := steps[best]
		r.Figures["best_rate_per_s"], r.Figures["best_p99_ms"], r.Figures["best_load_1m"] = b.Rate, b.Search.P99Ms, b.Load1
		detail := fmt.Sprintf("highest rate with p99 < %.0f ms: %.0f/s (p99 %.1f ms, load average %.1f)", o.P99Ms, b.Rate, b.Search.P99Ms, b.Load1)
		var missed []string
		for _, st := range steps[:best] {
			if !st.Held {
				missed = append(missed, fmt.Sprintf("%.0f/s (p99 %.1f ms)", st.Rate, st.Search.P99Ms))
			}
		}
		if len(missed) > 0 {
			detail += "; lower rates that missed it: " + strings.Join(missed, ", ") + " — the machine's noise, not a sustained rate"
			r.Figures["lower_rates_missed"] = float64(len(missed))
		}
		r.Checks = append(r.Checks, report.Check{Name: "search p99 objective", OK: true, Detail: detail})
	} else {
		detail := "no step ran"
		if len(steps) > 0 {
			s := steps[0]
			detail = fmt.Sprintf("already the lowest rate, %.0f/s, missed it: p99 %.1f ms, errors %.2f%%, load average %.1f", s.Rate, s.Search.P99Ms, 100*s.ErrorRate, s.Load1)
		}
		r.Checks = append(r.Checks, report.Check{Name: "search p99 objective", OK: false, Detail: detail})
		if len(steps) > 0 {
			r.Ops = map[string]engine.OpStats{"search": steps[0].Search}
		}
	}
	if r.Ops == nil {
		r.Ops = map[string]engine.OpStats{}
	}
	// The mix must find hotels, or it measured empty answers.
	kinds := make([]string, 0, len(mix.found))
	for k := range mix.found {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var parts []string
	for _, k := range kinds {
		c := mix.found[k]
		ratio := float64(c[1].Load()) / float64(max(c[0].Load(), 1))
		r.Figures["found_ratio_"+k] = ratio
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*ratio))
	}
	r.Notes = append(r.Notes, "searches that found at least one hotel, by kind: "+strings.Join(parts, ", "))

	// 4. Lag from a catalog change to search.
	if o.LagSamples > 0 {
		if err := e.searchLag(ctx, r, o.LagSamples); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// servedWithin reads the booking services' histogram of GET /v1/hotels
// (bucket upper bound in seconds → count, summed over services and
// status codes) and returns it minus before (nil: as it is).
func (e *Env) servedWithin(ctx context.Context, t client.Targets, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, region := range t.Regions {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL[region]+"/metrics", nil)
		if err != nil {
			return nil
		}
		resp, err := e.Client.HTTP.Do(req)
		if err != nil {
			return nil
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "http_server_request_duration_seconds_bucket{") ||
				!strings.Contains(line, `http_route="/v1/hotels"`) || !strings.Contains(line, `http_request_method="GET"`) {
				continue
			}
			_, rest, ok := strings.Cut(line, `le="`)
			le, rest, ok2 := strings.Cut(rest, `"`)
			i := strings.LastIndexByte(rest, ' ')
			if !ok || !ok2 || i < 0 {
				continue
			}
			if v, err := strconv.ParseFloat(rest[i+1:], 64); err == nil {
				out[le] += v
			}
		}
		resp.Body.Close()
	}
	for k, v := range before {
		out[k] -= v
	}
	return out
}

func heldWord(ok bool) string {
	if ok {
		return "held"
	}
	return "MISSED"
}

// stepTable is the steps as a readable table (a note of the report).
func stepTable(steps []StepResult, p99 float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rate steps (objective p99 < %.0f ms): offered/s → done/s, p50, p99, errors, load average", p99)
	for _, s := range steps {
		fmt.Fprintf(&b, "; %.0f → %.1f, %.1f ms, %.1f ms, %.2f%%, %.1f (%s", s.Rate, s.Search.Throughput, s.Search.P50Ms,
			s.Search.P99Ms, 100*s.ErrorRate, s.Load1, heldWord(s.Held))
		if s.ServedWithin100ms > 0 {
			fmt.Fprintf(&b, "; the service answered %.1f%% within 100 ms", 100*s.ServedWithin100ms)
		}
		b.WriteString(")")
	}
	return b.String()
}

// loadAverage is the host's one-minute load average (-1 where unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

type indexStatus struct {
	Progress struct {
		State      string    `json:"state"`
		Indexed    int       `json:"indexed"`
		Total      int       `json:"total"`
		Hotels     int       `json:"hotels"`
		Nights     int       `json:"nights"`
		StartedAt  time.Time `json:"started_at"`
		FinishedAt time.Time `json:"finished_at"`
		Error      string    `json:"error"`
	} `json:"progress"`
	Index struct {
		Hotels int `json:"hotels"`
	} `json:"index"`
}

// buildIndexes rebuilds the search index of every service in o.Indexes,
// shows progress, and records the build time, the hotels indexed and the
// service's live heap before and after (liveHeap).
func (e *Env) buildIndexes(ctx context.Context, r *report.Report, o Search, mix *searchMix) error {
	ops := e.Client.Ops()
	call := func(method, base string) (indexStatus, error) {
		var st indexStatus
		req, err := http.NewRequestWithContext(ctx, method, base+"/v1/search/rebuild", nil)
		if err != nil {
			return st, err
		}
		req.Header.Set("Authorization", "Bearer "+ops)
		resp, err := e.Client.HTTP.Do(req)
		if err != nil {
			return st, err
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		if _, err := body.ReadFrom(resp.Body); err != nil {
			return st, err
		}
		if resp.StatusCode >= 300 {
			return st, fmt.Errorf("%s %s/v1/search/rebuild: %d %s", method, base, resp.StatusCode, strings.TrimSpace(body.String()))
		}
		return st, json.Unmarshal(body.Bytes(), &st)
	}
	for _, region := range o.Indexes.Regions {
		base := o.Indexes.URL[region]
		if o.NoRebuild {
			st, err := call(http.MethodGet, base)
			if err != nil {
				return fmt.Errorf("index status: %w", err)
			}
			r.Figures["hotels_indexed"] = max(r.Figures["hotels_indexed"], float64(st.Index.Hotels))
			r.Checks = append(r.Checks, report.Check{Name: "index of " + region + " holds the catalog", OK: st.Index.Hotels >= o.Hotels,
				Detail: fmt.Sprintf("%d hotels indexed (not rebuilt), %d seeded", st.Index.Hotels, o.Hotels)})
			continue
		}
		before, _ := scrapeMetrics(ctx, e.Client.HTTP, base)
		liveBefore := liveHeap(before)
		if _, err := call(http.MethodPost, base); err != nil {
			return fmt.Errorf("start the index build: %w", err)
		}
		e.logf("search: index of %s (%s): rebuilding …", region, base)
		var st indexStatus
		var last, indexing time.Time // indexing: when the snapshot was read
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
			var err error
			if st, err = call(http.MethodGet, base); err != nil {
				return fmt.Errorf("index build progress: %w", err)
			}
			p := st.Progress
			if !e.Quiet && time.Since(last) >= time.Second {
				e.logf("search: index of %s: %-9s snapshot %d hotels, %d nights; indexed %d/%d", region, p.State, p.Hotels, p.Nights, p.Indexed, p.Total)
				last = time.Now()
			}
			if indexing.IsZero() && p.State != "snapshot" && p.State != "starting" {
				indexing = time.Now()
			}
			if p.State == "failed" {
				return fmt.Errorf("index build of %s failed: %s", base, p.Error)
			}
			if p.State == "done" {
				break
			}
		}
		build := st.Progress.FinishedAt.Sub(st.Progress.StartedAt).Seconds()
		key := "index_" + region
		r.Figures[key+"_build_s"], r.Figures[key+"_hotels"] = build, float64(st.Index.Hotels)
		r.Figures["hotels_indexed"] = max(r.Figures["hotels_indexed"], float64(st.Index.Hotels))
		r.Figures["index_build_s"] = max(r.Figures["index_build_s"], build)
		snapshot := indexing.Sub(st.Progress.StartedAt).Seconds() // to the poll's 250 ms
		r.Figures[key+"_snapshot_s"] = snapshot
		msg := fmt.Sprintf("index of %s: %d hotels built in %.1f s (%.1f s reading the snapshot of %d hotels and %d nights, %.1f s indexing)",
			region, st.Index.Hotels, build, snapshot, st.Progress.Hotels, st.Progress.Nights, build-snapshot)
		after, warm := e.afterGC(ctx, base, st.Progress.FinishedAt, mix)
		if liveBefore > 0 && liveHeap(after) > 0 {
			live, rss := liveHeap(after)/(1<<20), after["process_resident_memory_bytes"]/(1<<20)
			r.Figures[key+"_live_heap_mib"], r.Figures[key+"_rss_mib"] = live, rss
			r.Figures[key+"_live_heap_before_mib"] = liveBefore / (1 << 20)
			r.Figures["index_live_heap_mib"] = max(r.Figures["index_live_heap_mib"], live-liveBefore/(1<<20))
			msg += fmt.Sprintf("; the service's live heap %.0f MiB after it (%.0f before: the index takes %.0f MiB), resident %.0f MiB (%d warm-up searches until a GC after the build)",
				live, liveBefore/(1<<20), live-liveBefore/(1<<20), rss, warm)
		} else {
			msg += "; no Go runtime metrics on /metrics, memory not measured"
		}
		e.logf("search: %s", msg)
		r.Notes = append(r.Notes, msg)
		r.Checks = append(r.Checks, report.Check{Name: "index of " + region + " holds the catalog", OK: st.Index.Hotels >= o.Hotels,
			Detail: fmt.Sprintf("%d hotels indexed, %d seeded", st.Index.Hotels, o.Hotels)})
	}
	return nil
}

// liveHeap estimates the heap the last GC found live from Go's runtime
// metrics: the GC sets its next goal to live × (1 + GOGC/100), so live is
// the goal divided by that (0 when the metrics are absent). Unlike the heap
// in use, it does not count garbage not yet collected.
func liveHeap(m map[string]float64) float64 {
	goal, gogc := m["go_memstats_next_gc_bytes"], m["go_gc_gogc_percent"]
	if goal <= 0 || gogc <= 0 {
		return 0
	}
	return goal / (1 + gogc/100)
}

// afterGC searches the service at base directly (one at a time, the
// scenario's own mix: a warm-up) until it has run a GC after since, so its
// live heap counts the new index and not the one it replaced, and returns
// its metrics then and the number of searches it took. It gives up after
// three minutes (Go forces a GC every two).
func (e *Env) afterGC(ctx context.Context, base string, since time.Time, mix *searchMix) (map[string]float64, int) {
	deadline := time.Now().Add(3 * time.Minute)
	n := 0
	for {
		m, err := scrapeMetrics(ctx, e.Client.HTTP, base)
		if err != nil || m["go_memstats_last_gc_time_seconds"] == 0 {
			return nil, n
		}
		if m["go_memstats_last_gc_time_seconds"] > float64(since.UnixNano())/1e9 || time.Now().After(deadline) || ctx.Err() != nil {
			return m, n
		}
		for range 10 {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/hotels?"+mix.query(mix.kind()).Encode(), nil)
			if err != nil {
				return nil, n
			}
			if resp, err := e.Client.HTTP.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			n++
		}
	}
}

// scrapeMetrics reads the unlabelled samples and the sums of labelled ones
// from a Prometheus text endpoint.
func scrapeMetrics(ctx context.Context, hc *http.Client, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %d", base, resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[name] += v
		}
	}
	return out, sc.Err()
}

// searchLag creates n hotels, then renames each, one at a time, and
// searches for each new name every 10 ms until the hotel is found: the time
// from the write's answer (the commit) to the first search that finds it.
func (e *Env) searchLag(ctx context.Context, r *report.Report, n int) error {
	rec := engine.NewRecorder()
	region := e.Client.Targets.Regions[0]
	find := func(word, id string) (time.Duration, string) {
		start := time.Now()
		deadline := start.Add(30 * time.Second)
		for time.Now().Before(deadline) {
			resp, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodGet, Path: "/v1/hotels?q=" + word})
			if err != nil {
				return time.Since(start), client.Outcome(resp, err)
			}
			var p searchPage
			if resp.Status == http.StatusOK && resp.Decode(&p) == nil {
				for _, h := range p.Hotels {
					if h.ID == id {
						return time.Since(start), "ok"
					}
				}
			}
			select {
			case <-ctx.Done():
				return time.Since(start), "timeout"
			case <-time.After(10 * time.Millisecond):
			}
		}
		return time.Since(start), "timeout"
	}
	e.logf("search: lag after a catalog change, %d hotels created and renamed …", n)
	for range n {
		word := lagWord()
		resp, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/hotels", Token: e.Client.Admin(),
			Body: map[string]any{"name": "Lag " + word, "city": "Wien", "country": "AT", "timezone": "Europe/Vienna", "home_region": region}})
		if err != nil || resp.Status != http.StatusCreated {
			return fmt.Errorf("create a hotel: %s %s", client.Outcome(resp, err), resp.Body)
		}
		var h struct {
			ID string `json:"hotel_id"`
		}
		if err := resp.Decode(&h); err != nil {
			return fmt.Errorf("create a hotel: %w", err)
		}
		d, out := find(word, h.ID)
		rec.Record("lag_create", d, out)
		word = lagWord()
		resp, err = e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPatch, Path: "/v1/hotels/" + h.ID,
			Token: e.Client.Admin(), Body: map[string]any{"name": "Lag " + word}})
		if err != nil || resp.Status != http.StatusOK {
			return fmt.Errorf("rename a hotel: %s %s", client.Outcome(resp, err), resp.Body)
		}
		d, out = find(word, h.ID)
		rec.Record("lag_update", d, out)
	}
	for k, v := range rec.Ops(0) {
		r.Ops[k] = v
		e.logf("search: %s: p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d", k, v.P50Ms, v.P99Ms, v.MaxMs, v.Count)
	}
	return nil
}

// lagWord is a word no seeded hotel is named with (ten letters: far more
// than two edits from anything else).
func lagWord() string {
	return "lag" + strings.NewReplacer("-", "", "0", "q", "1", "w", "2", "x", "3", "y", "4", "z", "5", "k", "6", "j", "7", "v", "8", "p", "9", "m").
		Replace(uuid.NewString())[:9]
}
