package scenario

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/router"
	"github.com/berthhq/berth/internal/searchindex"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
)

// The search scenario, scaled down, against a real platform in miniature:
// a booking server whose search index is fed through an in-process
// JetStream server by the outbox relay, behind a router. The seed lands in
// the index by the scenario's rebuild, the mix finds hotels with every kind
// of query, both rates are stepped, and every lag sample is found.
func TestSearchScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	idx := searchindex.New(quiet)
	env := bookingtest.Start(t, bookingtest.Options{Configure: func(c *httpapi.Config, store *postgres.Store) {
		c.Search = idx
		c.SearchAdmin = searchAdmin{idx: idx, start: func() error { return idx.StartBuild(ctx, store) }}
	}})
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	relay := natsbus.NewRelay(js, env.Store, natsbus.RelayConfig{Region: "us-east", Poll: 10 * time.Millisecond, Log: quiet})
	relayDone, runDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(relayDone); relay.Run(ctx) }()
	go func() {
		defer close(runDone)
		if err := idx.Run(ctx, js, searchindex.ConsumerConfig("us-east", uuid.NewString()[:8], quiet), env.Store); err != nil {
			t.Errorf("search run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-relayDone
		<-runDone
		nc.Close()
		_ = idx.Close()
	})

	// The router of the region, in front of the booking server.
	dir := placement.NewDirectory(postgres.NewPlacements(env.DB), quiet)
	if err := dir.Load(ctx); err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(router.Config{Region: "us-east", Bookings: map[string]string{"us-east": env.URL}, Directory: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rsrv := httptest.NewServer(rt)
	t.Cleanup(rsrv.Close)

	tg, err := client.ParseTargets("us-east=" + rsrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	tg.Kind = map[string]string{"us-east": "router"}
	cl, err := client.New(tg, bookingtest.Secret, "", "", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	pool, err := pgxpool.New(ctx, env.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	deadline := time.Now().Add(30 * time.Second)
	for !idx.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("the first index build did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
	indexes, err := client.ParseTargets("us-east=" + env.URL)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Client: cl, DB: pool, Store: env.DB, Log: io.Discard, Quiet: true}
	const hotels = 400
	r, err := e.RunSearch(ctx, Search{Hotels: hotels, RoomTypes: 2, Nights: 10, Rooms: 5, Indexes: indexes,
		Rates: []float64{10, 20}, Step: time.Second, P99Ms: 30_000, MaxErrorRate: 0.01, LagSamples: 3, Workers: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("figures %v\nnotes:\n%s", r.Figures, strings.Join(r.Notes, "\n"))
	checksPass(t, r)
	if got := r.Figures["hotels_indexed"]; got < hotels {
		t.Errorf("hotels indexed %v, want %d", got, hotels)
	}
	if r.Figures["best_rate_per_s"] != 20 {
		t.Errorf("best rate %v, want the last step (20/s) under an objective of 30 s; %s", r.Figures["best_rate_per_s"], strings.Join(r.Notes, " | "))
	}
	if s := r.Ops["search"]; s.Count == 0 || s.Outcomes["ok"] != s.Count {
		t.Errorf("search: %d, outcomes %v; want every one ok", s.Count, s.Outcomes)
	}
	// The queries that ask for a whole city, or for a seeded hotel's own
	// words with typos, find hotels every time: the mix asks for what the
	// seed wrote (cities by their English names included). (Radius,
	// amenity and price queries may rightly find nothing among the ten
	// hotels of a city at this scale.)
	drawn := 0
	for _, k := range []string{"text_typo", "exonym", "city_dates", "paging"} {
		ratio, ok := r.Figures["found_ratio_"+k]
		if !ok {
			continue // a kind may not have been drawn in 30 arrivals
		}
		drawn++
		if ratio != 1 {
			t.Errorf("%s found hotels in %.0f%% of searches", k, 100*ratio)
		}
	}
	if drawn < 2 {
		t.Errorf("only %d of the city-wide kinds drawn: %v", drawn, r.Figures)
	}
	for _, op := range []string{"lag_create", "lag_update"} {
		if s := r.Ops[op]; s.Count != 3 || s.Outcomes["ok"] != 3 {
			t.Errorf("%s: %d samples, outcomes %v; want 3 found", op, s.Count, s.Outcomes)
		}
	}
}

// The typos of the mix stay within what the index forgives (one edit in
// a word of 3–5 letters as typed, two in a longer one), or the scenario
// would measure searches that rightly find nothing.
func TestTypoWithinTolerance(t *testing.T) {
	for range 2000 {
		w := pick([]string{"Palace", "Garden", "Cathedral", "Panorama", "View", "münchen", "københavn", "Harbour", "Inn"})
		got := typo(w)
		want := []rune(strings.ToLower(w))
		allowed := 0
		switch n := len([]rune(got)); {
		case n >= 6:
			allowed = 2
		case n >= 3:
			allowed = 1
		}
		if d := levenshtein([]rune(got), want); d > allowed || (len(want) >= 4 && d == 0) {
			t.Fatalf("typo(%q) = %q: %d edits, the index allows %d (and a typo makes at least one)", w, got, d, allowed)
		}
	}
}

func levenshtein(a, b []rune) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// searchAdmin is the httpapi.SearchAdmin the booking service wires.
type searchAdmin struct {
	idx   *searchindex.Index
	start func() error
}

func (a searchAdmin) Rebuild() error                 { return a.start() }
func (a searchAdmin) Progress() searchindex.Progress { return a.idx.Progress() }
func (a searchAdmin) Stats() searchindex.Stats       { return a.idx.Stats() }
