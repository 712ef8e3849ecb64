package router_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/router"
)

// hopCounter counts the connections the router's transport dials to its
// upstreams and the Write calls made on them.
type hopCounter struct{ dials, writes atomic.Int64 }

func (h *hopCounter) transport() *http.Transport {
	tr := router.NewTransport()
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		h.dials.Add(1)
		return &writeCounted{Conn: c, writes: &h.writes}, nil
	}
	return tr
}

type writeCounted struct {
	net.Conn
	writes *atomic.Int64
}

func (c *writeCounted) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// startRouter serves a router of us-east whose every upstream is upstream.
func startRouter(t *testing.T, upstream string, tr http.RoundTripper) string {
	t.Helper()
	db, _ := dbtest.New(t, postgres.Options{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := placement.NewDirectory(postgres.NewPlacements(db), quiet)
	if err := dir.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(router.Config{Region: "us-east", Bookings: map[string]string{"us-east": upstream},
		ReadModel: upstream, Directory: dir, Logger: quiet, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	return srv.URL
}

// A forwarded request reaches the booking service as the client sent it —
// method, path and query, body bytes with their Content-Length, end-to-end
// headers — less the hop-by-hop ones, and leaves the router in one write
// of headers and body (the body is buffered, its length known).
func TestForwardedRequestIsOneWriteOfTheSameBytes(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, uri string
		length      int64
		chunked     bool
		header      http.Header
		body        []byte
	}
	got := make(chan seen, 16)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.ContentLength, len(r.TransferEncoding) > 0, r.Header.Clone(), b}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"x"}`)
	}))
	t.Cleanup(upstream.Close)
	hops := &hopCounter{}
	tr := hops.transport()
	t.Cleanup(tr.CloseIdleConnections)
	base := startRouter(t, upstream.URL, tr)

	body := []byte(`{"name":"Hôtel du Port","rooms":[` + strings.Repeat(`{"n":1},`, 200) + `{"n":2}]}`)
	const n = 10
	for i := range n {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/hotels?dry_run=1&q=a%2Fb", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer abc.def.ghi")
		req.Header.Set("Idempotency-Key", "key-1")
		req.Header.Add("X-Custom", "one")
		req.Header.Add("X-Custom", "two")
		req.Header.Set("Connection", "X-Hop")
		req.Header.Set("X-Hop", "connection-scoped")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || string(answer) != `{"id":"x"}` {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, answer)
		}
		s := <-got
		if s.method != http.MethodPost || s.uri != "/v1/hotels?dry_run=1&q=a%2Fb" {
			t.Errorf("upstream saw %s %s", s.method, s.uri)
		}
		if !bytes.Equal(s.body, body) || s.length != int64(len(body)) || s.chunked {
			t.Errorf("upstream body: %d bytes, Content-Length %d, chunked %v; want the client's %d bytes", len(s.body), s.length, s.chunked, len(body))
		}
		for _, k := range []string{"Content-Type", "Authorization", "Idempotency-Key"} {
			if s.header.Get(k) != req.Header.Get(k) {
				t.Errorf("upstream %s = %q, want %q", k, s.header.Get(k), req.Header.Get(k))
			}
		}
		if v := s.header.Values("X-Custom"); len(v) != 2 || v[0] != "one" || v[1] != "two" {
			t.Errorf("upstream X-Custom = %q", v)
		}
		if s.header.Get("X-Hop") != "" {
			t.Error("a header the client's Connection named went upstream")
		}
	}
	if d, w := hops.dials.Load(), hops.writes.Load(); d != 1 || w != n {
		t.Errorf("%d requests one after the other: %d connection(s), %d write(s); want 1 and %d", n, d, w, n)
	}
}

// Concurrent requests reuse the connections of earlier ones: a second
// burst as wide as the first opens no new connection to the booking
// service (the transport keeps that many idle per host; net/http's default
// of two would make every request beyond two dial again).
func TestConcurrentRequestsReuseUpstreamConnections(t *testing.T) {
	t.Parallel()
	const width = 48
	var (
		mu      sync.Mutex
		waiting int
		release = make(chan struct{})
	)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Hold every request until the whole burst is in flight, so each
		// needs a connection of its own.
		mu.Lock()
		waiting++
		if waiting == width {
			close(release)
		}
		ch := release
		mu.Unlock()
		<-ch
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(upstream.Close)
	hops := &hopCounter{}
	tr := hops.transport()
	t.Cleanup(tr.CloseIdleConnections)
	base := startRouter(t, upstream.URL, tr)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: width}}

	burst := func() {
		t.Helper()
		var wg sync.WaitGroup
		for range width {
			wg.Go(func() {
				resp, err := client.Get(base + "/v1/hotels")
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("status %d", resp.StatusCode)
				}
			})
		}
		wg.Wait()
	}
	burst()
	first := hops.dials.Load()
	if first != width {
		t.Fatalf("first burst of %d: %d connections", width, first)
	}
	mu.Lock()
	waiting, release = 0, make(chan struct{})
	mu.Unlock()
	burst()
	if d := hops.dials.Load() - first; d != 0 {
		t.Errorf("second burst of %d opened %d new connection(s), want 0", width, d)
	}
}
