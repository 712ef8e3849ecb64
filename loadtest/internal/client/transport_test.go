package client

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newClient is a client of srv's one region, closed when t ends.
func newClient(t *testing.T, srv *httptest.Server) *Client {
	t.Helper()
	tg, err := ParseTargets("us-east=" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(tg, "0123456789abcdef0123456789abcdef", "", "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// countConns starts srv counting the connections it accepts.
func countConns(srv *httptest.Server) *atomic.Int64 {
	var n atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	return &n
}

// TestTransportSendsWhatNetHTTPSends: a request through the Transport
// reaches the server with the method, path, headers (Accept-Encoding: gzip
// as net/http's Transport adds it, the caller's own) and body it was given,
// and the answer comes back whole; one connection serves them all in turn.
func TestTransportSendsWhatNetHTTPSends(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, auth, key, ctype, gzip, body string
		length                                     int64
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"),
			r.Header.Get("Content-Type"), r.Header.Get("Accept-Encoding"), string(b), r.ContentLength})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"reservation_id":"r-%d"}`, len(b))
	}))
	conns := countConns(srv)
	defer srv.Close()
	c := newClient(t, srv)
	for i := range 50 {
		key := fmt.Sprintf("key-%d", i)
		r, err := c.Do(context.Background(), Request{Method: http.MethodPost, Path: "/v1/hotels/h1/reservations?x=1",
			Token: "tok", IdemKey: key, Body: holdLike{GuestID: key}})
		if err != nil || r.Status != http.StatusCreated {
			t.Fatalf("request %d: %+v %v", i, r, err)
		}
		var res struct {
			ID string `json:"reservation_id"`
		}
		if err := r.Decode(&res); err != nil || res.ID == "" {
			t.Fatalf("request %d: %q %v", i, r.Body, err)
		}
	}
	for i, s := range got {
		want := seen{http.MethodPost, "/v1/hotels/h1/reservations?x=1", "Bearer tok", fmt.Sprintf("key-%d", i), "application/json", "gzip",
			fmt.Sprintf(`{"guest_id":"key-%d"}`, i), int64(len(fmt.Sprintf(`{"guest_id":"key-%d"}`, i)))}
		if s != want {
			t.Fatalf("request %d reached the server as %+v, want %+v", i, s, want)
		}
	}
	if len(got) != 50 || conns.Load() != 1 {
		t.Fatalf("%d requests over %d connections; want 50 over 1 (kept alive)", len(got), conns.Load())
	}
}

type holdLike struct {
	GuestID string `json:"guest_id"`
}

// TestTransportConcurrentRequests: requests in flight together each get a
// connection of their own and their own answer (run with -race).
func TestTransportConcurrentRequests(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond)
		io.Copy(w, r.Body) // echo
	}))
	conns := countConns(srv)
	defer srv.Close()
	c := newClient(t, srv)
	var wg sync.WaitGroup
	errs := make(chan error, 16*20)
	for w := range 16 {
		wg.Go(func() {
			for i := range 20 {
				body := fmt.Sprintf("worker %d request %d", w, i)
				r, err := c.Do(context.Background(), Request{Method: http.MethodPost, Path: "/", Body: []byte(body)})
				if err != nil || string(r.Body) != body {
					errs <- fmt.Errorf("%q: got %q, %v", body, r.Body, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := conns.Load(); n > 16 {
		t.Errorf("%d connections for 16 workers; idle ones are not re-used", n)
	}
}

// oneShotServer answers each connection's first request with 200 and then
// closes it without saying so (no "Connection: close"): a kept-alive
// connection the server dropped while it sat idle. It counts requests.
func oneShotServer(t *testing.T) (url string, requests *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	requests = &atomic.Int64{}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				req, err := http.ReadRequest(bufio.NewReader(nc))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				requests.Add(1)
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}()
		}
	}()
	return "http://" + ln.Addr().String(), requests
}

// TestTransportRetriesOnAClosedIdleConnection: a request whose re-used
// connection turns out closed is sent again on a new one when it is
// replayable (a GET, a POST with an Idempotency-Key), as net/http does, and
// fails otherwise (a POST without a key may have been received) — unless
// the idle connection was checked and found closed before it was used.
func TestTransportRetriesOnAClosedIdleConnection(t *testing.T) {
	t.Parallel()
	url, requests := oneShotServer(t)
	send := func(hc *http.Client, method, key string) error {
		// Let the server's close of the last connection arrive first.
		time.Sleep(20 * time.Millisecond)
		req, _ := http.NewRequest(method, url+"/", strings.NewReader("body"))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != "ok" {
			return fmt.Errorf("answer %q, %v", b, err)
		}
		return nil
	}
	unchecked := NewTransport()
	unchecked.CheckIdleAfter = time.Hour
	defer unchecked.CloseIdleConnections()
	hc := &http.Client{Transport: unchecked, Timeout: 5 * time.Second}
	for i, r := range []struct{ method, key string }{{"GET", ""}, {"GET", ""}, {"POST", "k1"}, {"POST", "k2"}} {
		if err := send(hc, r.method, r.key); err != nil {
			t.Fatalf("request %d (%s, key %q): %v", i, r.method, r.key, err)
		}
	}
	before := requests.Load()
	if err := send(hc, http.MethodPost, ""); err == nil {
		t.Fatal("a POST without an Idempotency-Key was sent again on a new connection")
	}
	if requests.Load() != before {
		t.Fatalf("the server saw %d requests for a failed send", requests.Load()-before)
	}

	checked := NewTransport()
	checked.CheckIdleAfter = 0
	defer checked.CloseIdleConnections()
	hc = &http.Client{Transport: checked, Timeout: 5 * time.Second}
	for i := range 3 {
		if err := send(hc, http.MethodPost, ""); err != nil {
			t.Fatalf("checked idle connection, POST %d: %v", i, err)
		}
	}
}

// TestTransportAnswersReadPartly: an answer closed before its end (a stream
// left early, chunked) does not leave its connection in the pool mid-answer;
// the next request gets a whole answer of its own.
func TestTransportAnswersReadPartly(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			for i := range 20000 {
				fmt.Fprintf(w, "line %d of a long answer\n", i)
				if i%1000 == 0 {
					w.(http.Flusher).Flush() // chunked
				}
			}
			return
		}
		io.WriteString(w, "short")
	}))
	countConns(srv)
	defer srv.Close()
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	for range 3 {
		resp, err := hc.Get(srv.URL + "/stream")
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "line 0 of a long answer\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
		resp.Body.Close()
		resp, err = hc.Get(srv.URL + "/short")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "short" {
			t.Fatalf("after a stream left early: %q, %v", b, err)
		}
	}
	// A chunked answer read to its end keeps its connection.
	resp, err := hc.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.HasSuffix(b, []byte("line 19999 of a long answer\n")) {
		t.Fatalf("whole stream: %d bytes, %v", len(b), err)
	}
}

// TestTransportTimeoutAndCancel: a request the server does not answer in
// time ends with a timeout (the outcome "timeout"), one whose context is
// cancelled ends at once, and neither connection is re-used.
func TestTransportTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "done")
	}))
	conns := countConns(srv)
	defer srv.Close()
	defer close(release)
	tg, _ := ParseTargets("us-east=" + srv.URL)
	c, err := New(tg, "0123456789abcdef0123456789abcdef", "", "", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	r, err := c.Do(context.Background(), Request{Method: http.MethodGet, Path: "/slow"})
	if Outcome(r, err) != "timeout" || time.Since(start) > 5*time.Second {
		t.Fatalf("slow answer: outcome %s (%v) after %s", Outcome(r, err), err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/slow"}); err == nil {
		t.Fatal("a cancelled request returned an answer")
	}
	r, err = c.Do(context.Background(), Request{Method: http.MethodGet, Path: "/fast"})
	if err != nil || string(r.Body) != "done" {
		t.Fatalf("after a timeout: %q, %v", r.Body, err)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections; want 3 (a timed-out or cancelled one is never re-used)", n)
	}
}

// TestTransportGzip: a gzip answer (which the Transport asked for, as
// net/http's does) is decoded; a caller's own Accept-Encoding is left to it.
func TestTransportGzip(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") != "gzip" {
			io.WriteString(w, "plain:"+r.Header.Get("Accept-Encoding"))
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, "unzipped")
		zw.Close()
	}))
	defer srv.Close()
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	for range 2 {
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "unzipped" || !resp.Uncompressed {
			t.Fatalf("%q %v uncompressed %v", b, err, resp.Uncompressed)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "plain:identity" {
		t.Fatalf("%q", b)
	}
}

// TestTransportPutClosesStaleIdleConnections: returning a connection to the
// pool closes the ones beneath it idle past IdleTimeout and keeps the
// others, the returned one on top; past MaxIdlePerHost it is closed.
func TestTransportPutClosesStaleIdleConnections(t *testing.T) {
	t.Parallel()
	tr := NewTransport()
	tr.IdleTimeout = time.Minute
	tr.MaxIdlePerHost = 3
	now := time.Now()
	pipe := func(idle time.Duration) (*conn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return &conn{nc: a, lastUsed: now.Add(-idle)}, b
	}
	old1, peer1 := pipe(2 * time.Minute)
	old2, peer2 := pipe(90 * time.Second)
	fresh, peerFresh := pipe(time.Second)
	tr.idle = map[string][]*conn{"h:80": {old1, old2, fresh}}
	back, _ := pipe(0)
	tr.put("h:80", back)
	if got := tr.idle["h:80"]; len(got) != 2 || got[0] != fresh || got[1] != back {
		t.Fatalf("pool after put: %d connections, want [fresh, returned]", len(got))
	}
	closed := func(peer net.Conn) bool {
		_ = peer.SetReadDeadline(time.Now().Add(time.Second))
		_, err := peer.Read(make([]byte, 1))
		return err == io.EOF
	}
	if !closed(peer1) || !closed(peer2) {
		t.Error("a connection idle past IdleTimeout was left open")
	}
	_ = peerFresh.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := peerFresh.Read(make([]byte, 1)); err == io.EOF {
		t.Error("a connection within IdleTimeout was closed")
	}
	a, _ := pipe(0)
	b, peerB := pipe(0)
	tr.put("h:80", a)
	tr.put("h:80", b)
	if len(tr.idle["h:80"]) != 3 || !closed(peerB) {
		t.Errorf("past MaxIdlePerHost: %d idle, the extra one closed %v", len(tr.idle["h:80"]), closed(peerB))
	}
}

// TestTransportOnNewConnection: a request marked OnNewConnection is sent on
// a connection opened for it even when one is idle, and that connection is
// kept idle after it, so n such requests one after the other leave n open
// connections that unmarked requests then re-use; Dials counts them.
func TestTransportOnNewConnection(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	conns := countConns(srv)
	defer srv.Close()
	c := newClient(t, srv)
	for range 5 {
		if _, err := c.Do(OnNewConnection(context.Background()), Request{Method: http.MethodGet, Path: "/"}); err != nil {
			t.Fatal(err)
		}
	}
	if n, d := conns.Load(), c.Dials(); n != 5 || d != 5 {
		t.Fatalf("%d connections accepted, %d dialled after 5 marked requests in turn, want 5 and 5", n, d)
	}
	// Five unmarked requests in flight together find the five open.
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if _, err := c.Do(context.Background(), Request{Method: http.MethodGet, Path: "/"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n, d := conns.Load(), c.Dials(); n != 5 || d != 5 {
		t.Errorf("%d connections accepted, %d dialled after 5 more requests, want still 5 and 5", n, d)
	}
}
