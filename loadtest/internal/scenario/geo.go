package scenario

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/berthhq/berth/internal/wan"
	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/google/uuid"
)

// Geo is traffic from clients in every region: each reads availability and
// holds rooms through its own region's router, mostly at hotels homed
// there and a share (Foreign) at hotels homed elsewhere. Every request is
// measured under "read C>H" or "write C>H" (client region C, home region
// H), so the report shows what a client pays for a foreign partition: a
// read should cost what a local one does (served in C), a write one round
// trip C↔H more (served in H).
type Geo struct {
	HotelsPerRegion int
	Rooms           int
	Window          int
	Foreign         float64 // share of requests for partitions homed in another region
	ReadsPerWrite   float64
	Load            Load
}

// geoOp names the measurement of one request.
func geoOp(kind, client, home string) string { return kind + " " + client + ">" + home }

// RunGeo seeds hotels in every region and drives the clients.
func (e *Env) RunGeo(ctx context.Context, o Geo) (*report.Report, error) {
	cfg := o.Load.config()
	cfg["hotels_per_region"], cfg["rooms"], cfg["foreign_share"], cfg["reads_per_write"] = o.HotelsPerRegion, o.Rooms, o.Foreign, o.ReadsPerWrite
	if o.HotelsPerRegion < 1 || o.Foreign < 0 || o.Foreign > 1 || o.ReadsPerWrite < 0 || o.Window < 4 {
		return nil, fmt.Errorf("geo: want --hotels-per-region ≥ 1, --foreign in [0, 1], --reads-per-write ≥ 0, --window ≥ 4")
	}
	regions := e.Client.Targets.Regions
	r := e.newReport("geo", cfg)
	if len(regions) < 2 {
		return e.skipped("geo", cfg, fmt.Sprintf("only %d region answers: geo needs clients in several", len(regions))), nil
	}
	for _, reg := range regions {
		if e.Client.Targets.Kind[reg] != "router" {
			return e.skipped("geo", cfg, "region "+reg+" has no router answering: geo measures the routers' placement of reads and writes"), nil
		}
	}
	e.logf("geo: creating %d hotel(s) in each of %v …", o.HotelsPerRegion, regions)
	byHome := map[string][]Hotel{}
	var all []Hotel
	for i := range o.HotelsPerRegion * len(regions) {
		h, err := e.CreateHotel(ctx, i, regions[i%len(regions)], 1, o.Rooms, day(7), day(7+o.Window))
		if err != nil {
			return nil, fmt.Errorf("seed: hotel %d: %w", i, err)
		}
		byHome[h.Region] = append(byHome[h.Region], h)
		all = append(all, h)
	}
	ledger := audit.NewLedger()
	for _, h := range all {
		ledger.Touch("hotel", h.ID)
	}
	g := &geoRun{e: e, o: o, regions: regions, byHome: byHome, ledger: ledger, servedBy: map[string]map[string]int{}}
	// Warm each router's connections to every region (and the directory)
	// so the first measured writes do not pay for TCP set-up.
	for _, c := range regions {
		for _, h := range all {
			_, _ = e.Client.Do(ctx, client.Request{Region: c, Method: http.MethodGet, Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + day(8) + "&check_out=" + day(9)})
		}
	}
	e.drive(ctx, r, o.Load, engine.NewRecorder(), nil, g.task)
	g.conclude(r)
	e.finish(ctx, r, ledger)
	return r, nil
}

type geoRun struct {
	e       *Env
	o       Geo
	regions []string
	byHome  map[string][]Hotel
	ledger  *audit.Ledger

	mu       sync.Mutex
	servedBy map[string]map[string]int // op → X-Berth-Served-By → count
}

func (g *geoRun) task(ctx context.Context, s *engine.Session) {
	c := pick(g.regions)
	home := c
	if rand.Float64() < g.o.Foreign {
		others := slices.DeleteFunc(slices.Clone(g.regions), func(r string) bool { return r == c })
		home = pick(others)
	}
	h := pick(g.byHome[home])
	in := 7 + rand.IntN(max(g.o.Window-3, 1))
	if rand.Float64()*(g.o.ReadsPerWrite+1) < g.o.ReadsPerWrite {
		op := geoOp("read", c, home)
		s.Measure(op, func() string {
			resp, err := g.e.Client.Do(ctx, client.Request{Region: c, Method: http.MethodGet,
				Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + day(in) + "&check_out=" + day(in+1)})
			g.served(op, resp, err)
			return client.Outcome(resp, err)
		})
		return
	}
	guest := "geo-" + uuid.NewString()[:12]
	op := geoOp("write", c, home)
	s.Measure(op, func() string {
		resp, err := g.e.Client.Do(ctx, client.Request{Region: c, Method: http.MethodPost,
			Path: "/v1/hotels/" + h.ID + "/reservations", Token: g.e.Client.Guest(guest), IdemKey: uuid.NewString(),
			Body: holdBody(guest, h.RoomTypes[0], day(in), day(in+1), 1)})
		g.served(op, resp, err)
		if err == nil && resp.Status == http.StatusCreated {
			var res struct {
				ID string `json:"reservation_id"`
			}
			if resp.Decode(&res) == nil {
				g.ledger.Add(audit.Created{Kind: "hotel", PartitionID: h.ID, ID: res.ID, Status: "held"}, guest)
			}
		}
		return client.Outcome(resp, err)
	})
}

func (g *geoRun) served(op string, resp client.Response, err error) {
	if err != nil || resp.Status >= 300 {
		return
	}
	g.mu.Lock()
	if g.servedBy[op] == nil {
		g.servedBy[op] = map[string]int{}
	}
	g.servedBy[op][resp.Header.Get("X-Berth-Served-By")]++
	g.mu.Unlock()
}

// conclude checks where requests were served and adds, per pair, the
// figures: p50/p99 of reads and writes, the round trip the WAN table gives
// the pair, and what a write paid over a local write at its home region.
func (g *geoRun) conclude(r *report.Report) {
	readsLocal, writesHome := report.Check{Name: "reads served in the client's region", OK: true},
		report.Check{Name: "writes served by the partition's home region", OK: true}
	var readN, writeN int
	g.mu.Lock()
	for op, by := range g.servedBy {
		kind, pair, _ := strings.Cut(op, " ")
		c, h, _ := strings.Cut(pair, ">")
		want := c
		chk, n := &readsLocal, &readN
		if kind == "write" {
			want, chk, n = h, &writesHome, &writeN
		}
		for region, k := range by {
			*n += k
			if region != want {
				chk.OK = false
				chk.Detail += fmt.Sprintf("%d × %s served by %q; ", k, op, region)
			}
		}
	}
	g.mu.Unlock()
	readsLocal.Detail = strings.TrimSuffix(fmt.Sprintf("%d reads checked; %s", readN, readsLocal.Detail), "; ")
	writesHome.Detail = strings.TrimSuffix(fmt.Sprintf("%d writes checked; %s", writeN, writesHome.Detail), "; ")
	r.Checks = append(r.Checks, readsLocal, writesHome)

	anyRTT := false
	for _, c := range g.regions {
		for _, h := range g.regions {
			rd, wr := r.Ops[geoOp("read", c, h)], r.Ops[geoOp("write", c, h)]
			pair := c + ">" + h
			if rd.Count > 0 {
				r.Figures["read_p50_ms "+pair], r.Figures["read_p99_ms "+pair] = rd.P50Ms, rd.P99Ms
			}
			if wr.Count > 0 {
				r.Figures["write_p50_ms "+pair], r.Figures["write_p99_ms "+pair] = wr.P50Ms, wr.P99Ms
			}
			local := r.Ops[geoOp("write", h, h)]
			rtt, ok := wan.RTT(c, h)
			if c != h && wr.Count > 0 && local.Count > 0 && ok {
				r.Figures["write_extra_p50_ms "+pair] = wr.P50Ms - local.P50Ms
				r.Figures["wan_rtt_ms "+pair] = float64(rtt.Milliseconds())
				anyRTT = true
			}
		}
	}
	if anyRTT {
		r.Notes = append(r.Notes, "write_extra_p50_ms C>H = p50 of writes from C to partitions homed in H minus p50 of local writes in H; "+
			"with `make up WAN=1` it should be about wan_rtt_ms C>H (one round trip), and reads from C about the same for every H")
	}
}

// PrintGeo writes the per-pair table of a geo report.
func PrintGeo(w io.Writer, r *report.Report) {
	if r.Scenario != "geo" || r.Status == report.StatusSkipped {
		return
	}
	var regions []string
	for k := range r.Figures {
		if pair, ok := strings.CutPrefix(k, "read_p50_ms "); ok {
			c, _, _ := strings.Cut(pair, ">")
			if !slices.Contains(regions, c) {
				regions = append(regions, c)
			}
		}
	}
	slices.Sort(regions)
	fmt.Fprintln(w, "\nper (client region > home region), ms:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pair\treads\tread p50\tread p99\twrites\twrite p50\twrite p99\twrite − local write (p50)\tWAN RTT\t")
	for _, c := range regions {
		for _, h := range regions {
			pair := c + ">" + h
			rd, wr := r.Ops[geoOp("read", c, h)], r.Ops[geoOp("write", c, h)]
			extra, rtt := "—", "—"
			if v, ok := r.Figures["write_extra_p50_ms "+pair]; ok {
				extra = fmt.Sprintf("%.1f", v)
				rtt = fmt.Sprintf("%.0f", r.Figures["wan_rtt_ms "+pair])
			}
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%d\t%.1f\t%.1f\t%s\t%s\t\n", pair, rd.Count, rd.P50Ms, rd.P99Ms, wr.Count, wr.P50Ms, wr.P99Ms, extra, rtt)
		}
	}
	_ = tw.Flush()
}
