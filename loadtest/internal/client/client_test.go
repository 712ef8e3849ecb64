package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
)

func TestFollowsMisdirected(t *testing.T) {
	t.Parallel()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"reservation_id":"x"}`))
	}))
	defer home.Close()
	away := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusMisdirectedRequest)
		w.Write([]byte(`{"code":"misdirected","home_region":"eu-west","status":421}`))
	}))
	defer away.Close()
	tg, err := ParseTargets("us-east=" + away.URL + ",eu-west=" + home.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(tg, "0123456789abcdef0123456789abcdef", "", "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Do(context.Background(), Request{Region: "us-east", Method: "POST", Path: "/x", Body: map[string]int{"a": 1}})
	if err != nil || r.Status != 201 || r.Region != "eu-west" || c.Follows.Load() != 1 {
		t.Fatalf("%+v %v follows %d", r, err, c.Follows.Load())
	}
	if c.Guest("g1") == "" || c.Guest("g1") != c.Guest("g1") {
		t.Fatal("guest token not minted or not cached")
	}
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		r    Response
		err  error
		want string
	}{
		{Response{Status: 201}, nil, "ok"},
		{Response{Status: 409, Body: []byte(`{"code":"sold_out"}`)}, nil, "sold_out"},
		{Response{Status: 502, Body: []byte(`bad gateway`)}, nil, "http_502"},
		{Response{}, context.DeadlineExceeded, "timeout"},
		{Response{}, errors.New("connection refused"), "transport"},
	}
	for _, c := range cases {
		if got := Outcome(c.r, c.err); got != c.want {
			t.Errorf("%+v %v: %s, want %s", c.r, c.err, got, c.want)
		}
	}
}

// A run that invents a guest per request keeps at most maxGuestTokens
// tokens, and every token it hands out is one the platform accepts for
// that guest.
func TestGuestTokensStayBounded(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef0123456789abcdef"
	c, err := New(Targets{}, secret, "x", "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	verify, err := auth.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxGuestTokens + 100 {
		id := fmt.Sprintf("guest-%d", i)
		tok := c.Guest(id)
		if i%997 == 0 {
			p, err := verify.Verify(tok)
			if err != nil || p.Subject != id || p.Role != berth.RoleGuest {
				t.Fatalf("token of %s: %+v, %v", id, p, err)
			}
		}
		if n := c.cachedGuests(); n > maxGuestTokens {
			t.Fatalf("%d guest tokens kept after %d guests; want at most %d", n, i+1, maxGuestTokens)
		}
	}
	if c.Guest("recent") != c.Guest("recent") {
		t.Fatal("a cached guest got another token")
	}
}
