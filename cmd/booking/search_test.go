package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/natsbus/natstest"
)

// The service answers search from its index: a hotel created through its
// API is found within seconds, the lag (event time → indexed) is on
// /metrics, and `booking search rebuild` rebuilds the index showing
// progress while the hotel stays searchable.
func TestSearchThroughService(t *testing.T) {
	ns := natstest.Start(t)
	s := startServiceWith(t, serviceOptions{natsURL: ns.URL})
	created := time.Now()
	r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels", Token: s.Admin(), Body: map[string]any{
		"name": "Hotel Sacher", "city": "Wien", "country": "AT", "timezone": "Europe/Vienna", "home_region": "us-east",
		"latitude": 48.204, "longitude": 16.369}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	found := func() bool {
		r := s.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels?q=sachr&near=48.2,16.37&radius_km=2"})
		if r.Status != http.StatusOK {
			t.Fatalf("search: %d %s", r.Status, r.Body)
		}
		return strings.Contains(string(r.Body), "Hotel Sacher")
	}
	for !found() {
		if time.Since(created) > 30*time.Second {
			t.Fatal("the new hotel never appeared in search")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the new hotel was found %s after its creation", time.Since(created).Round(time.Millisecond))

	m := s.Do(bookingtest.Request{Method: "GET", Path: "/metrics"})
	count := regexp.MustCompile(`(?m)^berth_search_lag_seconds_count\{[^}]*region="us-east"[^}]*\} (\d+)`).FindSubmatch(m.Body)
	if count == nil {
		t.Fatalf("no berth_search_lag_seconds on /metrics:\n%s", grepLines(string(m.Body), "berth_search"))
	}
	if n, _ := strconv.Atoi(string(count[1])); n < 1 {
		t.Fatalf("berth_search_lag_seconds_count = %d", n)
	}
	if !regexp.MustCompile(`(?m)^berth_search_ready\{[^}]*\} 1$`).Match(m.Body) {
		t.Errorf("berth_search_ready is not 1:\n%s", grepLines(string(m.Body), "berth_search"))
	}

	// The operators' verb: starts the rebuild, prints progress, exits 0.
	var out bytes.Buffer
	tok := s.Token("ops", berth.RoleOps)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rebuildSearch(ctx, &out, []string{s.URL}, tok, 50*time.Millisecond, true); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "rebuild started") || !strings.Contains(out.String(), ": done in ") {
		t.Fatalf("progress output:\n%s", out.String())
	}
	if !found() {
		t.Fatal("the hotel is gone after the rebuild")
	}
	t.Logf("booking search rebuild:\n%s", out.String())
	// Bad flags are a usage error (exit code 2).
	cmd := newRootCmd()
	cmd.SetArgs([]string{"search", "rebuild"})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if err := cmd.Execute(); cli.ExitCode(err) != 2 {
		t.Fatalf("rebuild without --url: %v (exit %d)", err, cli.ExitCode(err))
	}
}

func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
