package client

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Transport is the generator's HTTP/1.1 round tripper for plain http://
// targets (the platform's routers and services); anything else goes to
// Fallback, a net/http Transport.
//
// Why not net/http's Transport: it hands every request to two goroutines of
// its own per connection (one writes the request, one reads the answer) and
// back, so a small POST and its small answer cost three goroutine switches
// and their wake-ups besides the two system calls. On two cores shared with
// the platform it measures, that made the generator about a tenth of the CPU
// per hold (docs/PERFORMANCE.md, "CPU per hold, by process"; ADR 0029).
// Here the caller's goroutine writes the request and reads the answer
// itself, on a kept-alive connection it holds alone for the round trip.
//
// What goes on the wire is net/http's own: Request.Write writes the request
// (with "Accept-Encoding: gzip" added as net/http's Transport adds it, and
// gzip answers decoded as it decodes them) and ReadResponse parses the
// answer, chunked or not. A connection goes back to the idle pool only once
// its answer was read to the end and neither side asked to close it. As
// net/http does, a request that fails on a re-used connection before any
// answer arrived (the server closed it while idle) is sent once more on a
// new connection when it is replayable: a GET or HEAD, or one carrying an
// Idempotency-Key.
type Transport struct {
	// Dial opens connections (net.Dialer.DialContext).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxIdlePerHost bounds the idle connections kept per host:port.
	MaxIdlePerHost int
	// IdleTimeout drops a connection idle this long rather than re-use it
	// (under the servers' own idle timeout, so a re-used connection is
	// seldom one the server is closing).
	IdleTimeout time.Duration
	// CheckIdleAfter: a connection idle at least this long is checked
	// before it is re-used (one non-blocking peek), and dropped when the
	// server closed it meanwhile — what net/http's reading goroutine
	// notices by itself. In a closed loop connections are idle for
	// microseconds and never checked.
	CheckIdleAfter time.Duration
	// Fallback serves every request whose scheme is not http.
	Fallback http.RoundTripper

	mu   sync.Mutex
	idle map[string][]*conn
	// dials counts the connections opened (Dials).
	dials atomic.Uint64
}

var _ http.RoundTripper = (*Transport)(nil)

// conn is one HTTP/1.1 connection with its buffers.
type conn struct {
	nc       net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	lastUsed time.Time
}

// NewTransport returns a Transport with the generator's settings.
func NewTransport() *Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &Transport{
		Dial:           d.DialContext,
		MaxIdlePerHost: 1024,
		IdleTimeout:    60 * time.Second,
		CheckIdleAfter: time.Second,
		Fallback: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         d.DialContext,
			MaxIdleConns:        4096,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     60 * time.Second,
		},
	}
}

// hostPort is the pool key and dial address of an http URL.
func hostPort(req *http.Request) string {
	if req.URL.Port() != "" {
		return req.URL.Host
	}
	return net.JoinHostPort(req.URL.Hostname(), "80")
}

// get takes an idle connection to addr (reused true) or dials one.
func (t *Transport) get(ctx context.Context, addr string) (c *conn, reused bool, err error) {
	now := time.Now()
	t.mu.Lock()
	for cs := t.idle[addr]; len(cs) > 0; cs = t.idle[addr] {
		c = cs[len(cs)-1]
		t.idle[addr] = cs[:len(cs)-1]
		if idle := now.Sub(c.lastUsed); idle < t.IdleTimeout {
			t.mu.Unlock()
			if idle < t.CheckIdleAfter || open(c.nc) {
				return c, true, nil
			}
			c.nc.Close()
			t.mu.Lock()
			continue
		}
		c.nc.Close()
	}
	t.mu.Unlock()
	return t.dial(ctx, addr)
}

func (t *Transport) dial(ctx context.Context, addr string) (*conn, bool, error) {
	nc, err := t.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	t.dials.Add(1)
	return &conn{nc: nc, br: bufio.NewReader(nc), bw: bufio.NewWriter(nc)}, false, nil
}

// Dials is how many connections the transport has opened so far.
func (t *Transport) Dials() uint64 { return t.dials.Load() }

// put returns a connection whose answer was read to the end to the pool.
// The pool is a stack (the most recently used on top, so a closed loop keeps
// re-using warm connections); the ones at its bottom idle past IdleTimeout
// — left over from a burst with more requests in flight — are closed here,
// rather than held open until the server closes them.
func (t *Transport) put(addr string, c *conn) {
	c.lastUsed = time.Now()
	var stale []*conn
	t.mu.Lock()
	if t.idle == nil {
		t.idle = map[string][]*conn{}
	}
	cs := t.idle[addr]
	n := 0
	for n < len(cs) && c.lastUsed.Sub(cs[n].lastUsed) >= t.IdleTimeout {
		n++
	}
	if n > 0 {
		stale = append(stale, cs[:n]...)
		cs = append(cs[:0], cs[n:]...)
	}
	if len(cs) < t.MaxIdlePerHost {
		cs = append(cs, c)
		c = nil
	}
	t.idle[addr] = cs
	t.mu.Unlock()
	if c != nil {
		stale = append(stale, c)
	}
	for _, s := range stale {
		s.nc.Close()
	}
}

// CloseIdleConnections closes the idle connections (http.Client calls it).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.nc.Close()
		}
	}
	if f, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// replayable is net/http's rule for sending a request again after a
// re-used connection failed: its body can be had again, and it is a safe
// method or carries an idempotency key.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

type newConnKey struct{}

// OnNewConnection marks a request context: the Transport sends it on a
// connection it opens for it, not an idle one, and keeps that connection
// idle afterwards like any other — a client opening its own connection.
func OnNewConnection(ctx context.Context) context.Context {
	return context.WithValue(ctx, newConnKey{}, true)
}

// RoundTrip sends req and returns its answer, whose body must be closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		if t.Fallback == nil {
			return nil, fmt.Errorf("unsupported scheme %q", req.URL.Scheme)
		}
		return t.Fallback.RoundTrip(req)
	}
	ctx := req.Context()
	addr := hostPort(req)
	// The gzip negotiation net/http's Transport adds (DisableCompression
	// off): the same request headers, and a gzip answer decoded.
	addedGzip := false
	if req.Method != http.MethodHead && req.Header.Get("Accept-Encoding") == "" && req.Header.Get("Range") == "" {
		r2 := *req
		r2.Header = req.Header.Clone()
		r2.Header.Set("Accept-Encoding", "gzip")
		req, addedGzip = &r2, true
	}
	var (
		c      *conn
		reused bool
		err    error
	)
	if ctx.Value(newConnKey{}) != nil {
		c, reused, err = t.dial(ctx, addr)
	} else {
		c, reused, err = t.get(ctx, addr)
	}
	if err != nil {
		return nil, err
	}
	resp, stop, err := t.exchange(ctx, c, req)
	if err != nil && reused && ctx.Err() == nil && closedUnder(err) && replayable(req) {
		// The server closed the idle connection under us: once more, on a
		// new connection, with the body again.
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, gerr
			}
			r2 := *req
			r2.Body = body
			req = &r2
		}
		if c, _, err = t.dial(ctx, addr); err != nil {
			return nil, err
		}
		resp, stop, err = t.exchange(ctx, c, req)
	}
	if err != nil {
		return nil, err
	}
	b := &body{rc: resp.Body, t: t, c: c, addr: addr, stop: stop, keep: !resp.Close && !req.Close}
	resp.Body = b
	if addedGzip && resp.Header.Get("Content-Encoding") == "gzip" {
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Uncompressed = true
		resp.Body = &gzipBody{body: b}
	}
	return resp, nil
}

// aLongTimeAgo is a deadline in the past: it fails a blocked read or write
// at once (a cancelled request).
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes req on c and reads its answer's head. On failure c is
// closed; on success stop ends the watch on ctx (false: it fired, and c
// must not be re-used).
func (t *Transport) exchange(ctx context.Context, c *conn, req *http.Request) (*http.Response, func() bool, error) {
	deadline, _ := ctx.Deadline()
	if err := c.nc.SetDeadline(deadline); err != nil {
		c.nc.Close()
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, func() bool, error) {
		stop()
		c.nc.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, nil, fmt.Errorf("%w (%v)", cerr, err)
		}
		return nil, nil, err
	}
	if err := req.Write(c.bw); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return fail(err)
		}
		// Informational answers (103 Early Hints …) come before the
		// answer; 101 would switch protocols, which the generator never
		// asks for.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		return resp, stop, nil
	}
}

// closedUnder reports whether err is a connection the server closed or
// reset before answering: nothing of an answer was read.
func closedUnder(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// drainMax is how much of an unread answer Close reads to keep the
// connection; an answer longer than that (a stream left early) costs the
// connection instead.
const drainMax = 64 << 10

// body is an answer's body; closing it returns the connection to the pool
// when the answer was read to its end, and closes it otherwise.
type body struct {
	rc        io.ReadCloser
	t         *Transport
	c         *conn
	addr      string
	stop      func() bool
	keep, eof bool
	closed    bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("read on a closed body")
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *body) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if !b.eof && b.keep {
		if _, err := io.CopyN(io.Discard, b.rc, drainMax); err == io.EOF {
			b.eof = true
		}
	}
	watched := b.stop()
	if b.eof && b.keep && watched {
		_ = b.rc.Close() // read to the end: nothing left to read
		b.t.put(b.addr, b.c)
		return nil
	}
	return b.c.nc.Close()
}

// gzipBody decodes a gzip answer the Transport asked for.
type gzipBody struct {
	body *body
	zr   *gzip.Reader
	err  error
}

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.zr == nil && g.err == nil {
		g.zr, g.err = gzip.NewReader(g.body)
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.zr.Read(p)
}

func (g *gzipBody) Close() error { return g.body.Close() }
