package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/origins"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/berthhq/berth/internal/rediscache/redistest"
)

// syncBuffer is an output written by the automatic mode's goroutine and
// read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Placement by origin, from the routers' tallies in Redis to the moves in
// the database: only a partition whose writes clearly come from another
// region moves, a freshly moved or created one waits for the cooldown, and
// the automatic mode keeps applying plans until interrupted.
func TestBalanceByOrigin(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	abroad := env.SeedHotel("us-east", 1, 0, bookingtest.Date(1), bookingtest.Date(2)) // guests book from eu-west
	split := env.SeedHotel("us-east", 1, 0, bookingtest.Date(1), bookingtest.Date(2))  // from eu-west and ap-south alike
	local := env.SeedHotel("us-east", 1, 0, bookingtest.Date(1), bookingtest.Date(2))  // from us-east
	rs := redistest.Start(t)
	rdb, err := ratelimit.NewClient(rs.URL(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	count := func(region, id string, n int) {
		c := origins.NewCounter(rdb, region, time.Hour)
		for range n {
			c.Count(berth.KindHotel, id)
		}
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	count("eu-west", abroad.ID, 150)
	count("us-east", abroad.ID, 10)
	count("eu-west", split.ID, 110)
	count("ap-south", split.ID, 110)
	count("us-east", local.ID, 200)
	count("eu-west", "6a1e2b4c-0000-4000-8000-000000000009", 500) // no such partition

	cfg := shardsConfig{DatabaseURL: env.DBURL, Output: "text"}
	urls := map[string]string{}
	for _, r := range berth.Regions() {
		urls[r] = rs.URL()
	}
	o := originOptions{Window: 10 * time.Minute, Rate: 50, RedisURLs: urls,
		Rules: placement.OriginRules{MinWrites: 100, MinShare: 0.6, Margin: 2, Cooldown: time.Hour, MaxMoves: 10}}
	home := func(id string) string {
		t.Helper()
		var h string
		if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT home_region FROM placements WHERE kind = 'hotel' AND partition_id = $1`, id).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}

	// Just created: every hotel is inside its cooldown.
	var out bytes.Buffer
	if err := runBalanceByOrigin(ctx, cfg, o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if home(abroad.ID) != "us-east" || !strings.Contains(out.String(), "moved recently (cooldown)") {
		t.Fatalf("a hotel inside its cooldown moved, or the reason is missing:\n%s", out.String())
	}
	// Past the cooldown: only the hotel booked from abroad moves.
	o.Rules.Cooldown = 0
	out.Reset()
	if err := runBalanceByOrigin(ctx, cfg, o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := []string{home(abroad.ID), home(split.ID), home(local.ID)}; got[0] != "eu-west" || got[1] != "us-east" || got[2] != "us-east" {
		t.Fatalf("homes after balancing by origin: %v\n%s", got, out.String())
	}
	for _, want := range []string{"no region clearly leads", "most writes already come from its home", "1 moves"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Run again: nothing left to do (the moved hotel is home now).
	out.Reset()
	if err := runBalanceByOrigin(ctx, cfg, o, &out); err != nil || !strings.Contains(out.String(), "0 moves") {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}

	// The automatic mode: a hotel whose guests turn out to be in ap-south
	// moves on a later round, without anyone running the command again.
	late := env.SeedHotel("us-east", 1, 0, bookingtest.Date(1), bookingtest.Date(2))
	o.Auto, o.Every = true, 50*time.Millisecond
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	auto := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- runBalanceByOrigin(actx, cfg, o, auto) }()
	time.Sleep(200 * time.Millisecond) // a few empty rounds first
	count("ap-south", late.ID, 120)
	deadline := time.Now().Add(30 * time.Second)
	for home(late.ID) != "ap-south" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("auto: %v", err)
	}
	if home(late.ID) != "ap-south" {
		t.Fatalf("the automatic mode did not move the hotel:\n%s", auto.String())
	}
}

func TestOriginOptionsValidate(t *testing.T) {
	t.Parallel()
	good := originOptions{Window: time.Minute, Rules: placement.OriginRules{MinWrites: 1, MinShare: 0.6, Margin: 1}}
	for _, tc := range []struct {
		name string
		edit func(*originOptions)
	}{
		{"even split may flap", func(o *originOptions) { o.Rules.MinShare = 0.5 }},
		{"margin below one", func(o *originOptions) { o.Rules.Margin = 0.9 }},
		{"window below a bucket", func(o *originOptions) { o.Window = time.Second }},
		{"no writes needed", func(o *originOptions) { o.Rules.MinWrites = 0 }},
		{"auto dry run", func(o *originOptions) { o.Auto, o.Every, o.DryRun = true, time.Minute, true }},
	} {
		o := good
		tc.edit(&o)
		var errs config.Errors
		o.validate(&errs)
		if errs.Err() == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	var errs config.Errors
	good.validate(&errs)
	if err := errs.Err(); err != nil {
		t.Errorf("good options refused: %v", err)
	}
}
