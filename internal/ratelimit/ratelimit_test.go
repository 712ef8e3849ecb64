package ratelimit_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/berthhq/berth/internal/rediscache/redistest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// replica is one router replica's limiter: its own client and connection
// pool, the region's one Redis.
func replica(t *testing.T, url string, timeout time.Duration) *ratelimit.Limiter {
	t.Helper()
	rdb, err := ratelimit.NewClient(url, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return ratelimit.New(rdb, ratelimit.Options{Prefix: "berth:test:rl", Timeout: timeout, Logger: quiet})
}

// slow is a rate no test outlives (1 per hour): the only budget a test
// sees is the burst, so counts are exact, whatever the machine's speed.
func slow(burst int) ratelimit.Limit { return ratelimit.Limit{Rate: 1.0 / 3600, Burst: burst} }

// TestReplicasShareOneBudget: two limiters (two router replicas) that
// alternate requests for one hotel spend one budget between them.
func TestReplicasShareOneBudget(t *testing.T) {
	srv := redistest.Start(t)
	a, b := replica(t, srv.URL(), time.Second), replica(t, srv.URL(), time.Second)
	check := ratelimit.Check{Scope: ratelimit.ScopeHotelWrites, ID: "hot", Limit: slow(10)}
	allowed := map[string]int{}
	for i := range 40 {
		l, name := a, "a"
		if i%2 == 1 {
			l, name = b, "b"
		}
		d := l.Allow(context.Background(), check)
		if d.FailedOpen {
			t.Fatal("failed open with Redis up")
		}
		if d.Allowed {
			allowed[name]++
		} else if d.RetryAfterSeconds() < 1 || d.RetryAfterSeconds() > 3600 {
			t.Fatalf("retry after %v", d.RetryAfter)
		}
	}
	if total := allowed["a"] + allowed["b"]; total != 10 {
		t.Fatalf("the replicas allowed %d requests together (a=%d b=%d), want the shared burst of 10", total, allowed["a"], allowed["b"])
	}
	if allowed["a"] == 0 || allowed["b"] == 0 {
		t.Fatalf("both replicas should have spent from the budget: %v", allowed)
	}
	t.Logf("40 requests alternating over 2 replicas, burst 10: allowed a=%d b=%d", allowed["a"], allowed["b"])
}

// TestAllOrNothing: a request refused by one scope spends nothing in the
// others.
func TestAllOrNothing(t *testing.T) {
	srv := redistest.Start(t)
	l := replica(t, srv.URL(), time.Second)
	ctx := context.Background()
	hotel := ratelimit.Check{Scope: ratelimit.ScopeHotelWrites, ID: "h", Limit: slow(3)}
	guest := ratelimit.Check{Scope: ratelimit.ScopeGuestHolds, ID: "g", Limit: slow(1)}
	if !l.Allow(ctx, hotel, guest).Allowed {
		t.Fatal("first request refused")
	}
	for range 5 {
		if l.Allow(ctx, hotel, guest).Allowed {
			t.Fatal("the guest's budget of 1 allowed a second hold")
		}
	}
	// The hotel spent 1 of 3; the 5 refusals spent nothing.
	for i := range 2 {
		if !l.Allow(ctx, hotel).Allowed {
			t.Fatalf("hotel request %d refused: refused requests spent the hotel's budget", i+2)
		}
	}
	if l.Allow(ctx, hotel).Allowed {
		t.Fatal("the hotel's burst of 3 allowed a fourth")
	}
}

// TestHotHotelDoesNotStarveOthers drives the middleware of two replicas:
// a flash sale hammers one hotel past its budget (429 with Retry-After)
// while every write to another hotel passes.
func TestHotHotelDoesNotStarveOthers(t *testing.T) {
	srv := redistest.Start(t)
	rules := ratelimit.Rules{ratelimit.ScopeHotelWrites: slow(20)}
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	var replicas []http.Handler
	for range 2 {
		mw := &ratelimit.Middleware{Limiter: replica(t, srv.URL(), time.Second), Rules: rules, Logger: quiet}
		replicas = append(replicas, mw.Wrap(backend))
	}
	send := func(i int, hotel string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/hotels/"+hotel+"/reservations", nil)
		req.RemoteAddr = "192.0.2." + strconv.Itoa(i%250+1) + ":1234" // many clients
		rec := httptest.NewRecorder()
		replicas[i%2].ServeHTTP(rec, req)
		return rec
	}
	hot := map[int]int{}
	for i := range 200 {
		rec := send(i, "hot-hotel")
		hot[rec.Code]++
		if rec.Code == http.StatusTooManyRequests {
			checkRateLimited(t, rec)
		}
		if i%10 == 0 { // the quiet hotel's traffic, interleaved
			if rec := send(i, "quiet-hotel"); rec.Code != http.StatusCreated {
				t.Fatalf("quiet hotel write %d: %d %s", i, rec.Code, rec.Body)
			}
		}
	}
	if hot[http.StatusCreated] != 20 || hot[http.StatusTooManyRequests] != 180 {
		t.Fatalf("hot hotel: %v, want 20 created and 180 rate limited", hot)
	}
	t.Logf("hot hotel: %d created, %d 429; quiet hotel: 20/20 created", hot[201], hot[429])
}

func checkRateLimited(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q", ct)
	}
	ra, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	if err != nil || ra < 1 || ra > 3600 {
		t.Fatalf("Retry-After %q", rec.Header().Get("Retry-After"))
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc["code"] != string(berth.CodeRateLimited) || doc["status"] != float64(429) {
		t.Fatalf("problem %s (%v)", rec.Body, err)
	}
}

// TestReadsPerClient: one client's reads are limited, another's are not;
// an invented token buys no fresh budget, a verified one is its own client.
func TestReadsPerClient(t *testing.T) {
	srv := redistest.Start(t)
	tokens, err := auth.New("rate-limit-test-secret-rate-limit-test")
	if err != nil {
		t.Fatal(err)
	}
	mw := &ratelimit.Middleware{Limiter: replica(t, srv.URL(), time.Second), Logger: quiet,
		Rules: ratelimit.Rules{ratelimit.ScopeClientReads: slow(5)}, Identify: ratelimit.Identifier{Tokens: tokens}.Identify}
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	get := func(ip, bearer string) int {
		req := httptest.NewRequest("GET", "/v1/hotels/h1/availability", nil)
		req.RemoteAddr = ip + ":1"
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	count := func(n int, f func(i int) int) (ok int) {
		for i := range n {
			if f(i) == http.StatusOK {
				ok++
			}
		}
		return ok
	}
	if n := count(20, func(i int) int { return get("198.51.100.1", "forged-"+strconv.Itoa(i)) }); n != 5 {
		t.Fatalf("client with forged tokens: %d of 20 allowed, want 5 (forged tokens count as the IP)", n)
	}
	if n := count(20, func(int) int { return get("198.51.100.2", "") }); n != 5 {
		t.Fatalf("second client: %d of 20 allowed, want 5", n)
	}
	tok, err := tokens.Mint(berth.Principal{Subject: "g-1", Role: berth.RoleGuest}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(20, func(int) int { return get("198.51.100.1", tok) }); n != 5 {
		t.Fatalf("verified guest behind an exhausted IP: %d of 20 allowed, want 5", n)
	}
}

// TestRedisDownFailsOpen: with Redis stopped, and with a Redis that accepts
// connections but never answers, every request is allowed (the limiter
// fails open, counts it) and none waits for Redis forever.
func TestRedisDownFailsOpen(t *testing.T) {
	srv := redistest.Start(t)
	l := replica(t, srv.URL(), 100*time.Millisecond)
	mw := &ratelimit.Middleware{Limiter: l, Rules: ratelimit.Rules{ratelimit.ScopeHotelWrites: slow(1)}, Logger: quiet}
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	post := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/hotels/h/reservations", nil))
		return rec.Code
	}
	if post() != http.StatusCreated || post() != http.StatusTooManyRequests {
		t.Fatal("with Redis up the burst of 1 should allow one and refuse the next")
	}
	srv.Stop()
	for i := range 20 {
		if c := post(); c != http.StatusCreated {
			t.Fatalf("request %d with Redis down: %d, want it passed (fail open)", i, c)
		}
	}
	if s := l.Stats(); s.FailOpen != 20 {
		t.Fatalf("fail-open counter %d, want 20", s.FailOpen)
	}
	// The same counts on /metrics, where the fault suite reads them.
	var m strings.Builder
	l.WriteMetrics(&m)
	for _, want := range []string{`berth_ratelimit_decisions_total{decision="allowed"} 1`, `berth_ratelimit_decisions_total{decision="denied"} 1`,
		`berth_ratelimit_decisions_total{decision="fail_open"} 20`} {
		if !strings.Contains(m.String(), want+"\n") {
			t.Fatalf("metrics lack %q:\n%s", want, m.String())
		}
	}

	// A black hole: accepts, never answers. Allow must return (fail open)
	// on its own timeout, not hang.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	hole := replica(t, "redis://"+ln.Addr().String()+"/0", 100*time.Millisecond)
	done := make(chan ratelimit.Decision, 1)
	go func() {
		done <- hole.Allow(context.Background(), ratelimit.Check{Scope: "hotel_writes", ID: "h", Limit: slow(1)})
	}()
	select {
	case d := <-done:
		if !d.Allowed || !d.FailedOpen {
			t.Fatalf("black-holed Redis: %+v, want allowed and failed open", d)
		}
	case <-time.After(30 * time.Second): // a hang, not a timing budget
		t.Fatal("Allow hung on a Redis that never answers")
	}
	if !hole.Allow(context.Background(), ratelimit.Check{Scope: "hotel_writes", ID: "h", Limit: slow(1)}).FailedOpen {
		t.Fatal("within the cooldown the limiter should fail open without asking")
	}

	// Redis back: limits resume after the cooldown (fresh limiter here, so
	// no waiting on the cooldown's clock).
	srv.Restart()
	l2 := replica(t, srv.URL(), time.Second)
	c := ratelimit.Check{Scope: "hotel_writes", ID: "h2", Limit: slow(1)}
	if d := l2.Allow(context.Background(), c); !d.Allowed || d.FailedOpen {
		t.Fatalf("after restart: %+v", d)
	}
	if l2.Allow(context.Background(), c).Allowed {
		t.Fatal("after restart the limit should hold again")
	}
}
