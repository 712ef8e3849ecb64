package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/telemetry"
)

// hopHeaders are connection-scoped and never forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	// The names are canonical already: a plain delete is what Del does
	// with them, without canonicalizing each again on every hop.
	for _, name := range hopHeaders {
		delete(h, name)
	}
}

// forward sends the request to target and copies the answer back.
//
//   - 421 misdirected (the partition moved): refresh the entry from the
//     database (falling back to the 421's home_region) and re-send to the
//     new home — again after every 421, with a short growing pause from the
//     second on, until FollowMovesFor has passed since the request arrived.
//     A partition moved back and forth while a request chases it is still
//     answered normally. Nothing committed on a 421 (the fence refused
//     inside the transaction), so re-sending is always safe, and the
//     request goes out unchanged, Idempotency-Key and all. Out of time, the
//     client gets 503 with Retry-After, never the 421: a 421 is the
//     router's business, not the client's.
//   - connection error: re-send once when rte.mayRetry (reads; writes with an
//     Idempotency-Key, which the booking service deduplicates). A write
//     first asks the database where its partition lives, so that after a
//     dead home region was drained the retry goes to the new home.
//     Otherwise — or when the retry fails too — 503 unavailable with
//     Retry-After.
func (rt *Router) forward(w *telemetry.StatusRecorder, r *http.Request, body []byte, target *url.URL, home string, rte route) {
	var (
		retried bool
		moves   int // 421s followed for this request
		start   = time.Now()
	)
	for {
		resp, err := rt.send(r, body, target)
		if err != nil {
			if r.Context().Err() != nil {
				return // the client went away; nobody to answer
			}
			if rte.mayRetry && !retried {
				retried = true
				rt.metrics.retries.Add(1)
				if !sleepCtx(r.Context(), rt.cfg.RetryBackoff) {
					return
				}
				if rte.toHome && home != "" {
					// A write to its home: the home may be down and its
					// partitions drained away meanwhile. Ask the database,
					// so that the retry — and this router's next requests —
					// go to the new home rather than wait for the event or
					// the next reload.
					if region, found, err := rt.cfg.Directory.Refresh(r.Context(), rte.kind, rte.id); err == nil && found && rt.bookings[region] != nil {
						target, home = rt.bookings[region], region
					}
				}
				continue
			}
			rt.metrics.upstreamErrors.Add(1)
			rt.log.WarnContext(r.Context(), "upstream unavailable", "target", target.Host, "method", r.Method, "path", r.URL.Path, "err", err)
			rt.problem(w, r, &berth.Error{Code: berth.CodeUnavailable, RetryAfter: 2, Err: err,
				Detail: "the service for this request (" + target.Host + ") is unavailable; retry shortly"})
			return
		}
		if resp.StatusCode != http.StatusMisdirectedRequest || rte.kind == "" {
			if moves > 1 {
				rt.metrics.misdirectedChains.Add(1)
			}
			rt.copyResponse(w, resp, home)
			return
		}
		moves++
		rt.metrics.misdirected.Add(1)
		hint := misdirectedHome(resp)
		region, found, err := rt.cfg.Directory.Refresh(r.Context(), rte.kind, rte.id)
		if err != nil || !found {
			// The database could not tell; trust the booking service's
			// answer (it read the placement row inside its transaction).
			region = hint
		}
		u := rt.bookings[region]
		if u == nil {
			rt.problem(w, r, &berth.Error{Code: berth.CodeUnavailable, Detail: "the partition's home region is not reachable from here", RetryAfter: 2})
			return
		}
		pause := moveBackoff(moves, rt.cfg.RetryBackoff)
		if time.Since(start)+pause > rt.cfg.FollowMovesFor {
			rt.metrics.misdirectedGaveUp.Add(1)
			rt.log.WarnContext(r.Context(), "partition kept moving", "kind", rte.kind, "partition_id", rte.id, "moves_followed", moves)
			rt.problem(w, r, &berth.Error{Code: berth.CodeUnavailable, RetryAfter: 1,
				Detail: "the partition is being moved between regions; retry shortly with the same Idempotency-Key"})
			return
		}
		if !sleepCtx(r.Context(), pause) {
			return
		}
		target, home = u, region
	}
}

// moveBackoff is the pause before following the n-th 421 of one request:
// none for the first (one move is the common case and the new home is
// known), then doubling from a tenth of base up to base, jittered so that
// the requests queued behind one move do not arrive together again.
func moveBackoff(n int, base time.Duration) time.Duration {
	if n <= 1 {
		return 0
	}
	d := base / 10 << min(n-2, 10)
	if d > base || d <= 0 {
		d = base
	}
	return d/2 + rand.N(d/2+1)
}

// sleepCtx waits d, or less when ctx ends first (then it reports false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// misdirectedHome reads home_region from a 421 body and closes it.
func misdirectedHome(resp *http.Response) string {
	defer resp.Body.Close()
	var p struct {
		HomeRegion string `json:"home_region"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(data, &p)
	return p.HomeRegion
}

// send makes one upstream attempt and returns the response with its headers
// read; the body is the caller's to close.
func (rt *Router) send(r *http.Request, body []byte, target *url.URL) (*http.Response, error) {
	u := new(url.URL)
	*u = *target
	u.Path = target.Path + r.URL.Path
	u.RawPath = ""
	if r.URL.RawPath != "" {
		u.RawPath = target.Path + r.URL.RawPath
	}
	u.RawQuery = r.URL.RawQuery
	// The attempt's deadline covers the wait for response headers; the body
	// copy that follows is bounded by the server's write timeout.
	ctx, cancel := context.WithTimeoutCause(r.Context(), rt.cfg.AttemptTimeout, errAttemptTimeout)
	out := outgoing(ctx, r.Method, u, body)
	out.Header = r.Header.Clone()
	removeHopHeaders(out.Header)
	// A client's own X-Forwarded-For is dropped; a trusted proxy's grows by
	// its address (BERTH_TRUSTED_PROXIES).
	delete(out.Header, "X-Forwarded-For")
	if xff := rt.cfg.TrustedProxies.ForwardHeader(r); xff != "" {
		out.Header.Set("X-Forwarded-For", xff)
	}
	out.Header.Set("X-Forwarded-Host", r.Host)
	// The constant values are shared, read-only slices (Set and Add never
	// write into a value slice; len = cap, an Add copies): no allocation
	// per hop for what never changes.
	if r.TLS != nil {
		out.Header["X-Forwarded-Proto"] = protoHTTPS
	} else {
		out.Header["X-Forwarded-Proto"] = protoHTTP
	}
	out.Header["X-Berth-Router"] = rt.regionValue
	resp, err := rt.transport.RoundTrip(out)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

var errAttemptTimeout = errors.New("upstream attempt timed out")

var (
	protoHTTP  = []string{"http"}
	protoHTTPS = []string{"https"}
)

// outgoing is http.NewRequestWithContext(ctx, method, u.String(), body as
// a bytes.Reader), less the round trip of the URL through its text: the
// same request (Host without an empty port, the body's length, a GetBody
// for the transport's own retries, http.NoBody for an empty body) without
// formatting a URL only to parse it back. The caller sets Header.
func outgoing(ctx context.Context, method string, u *url.URL, body []byte) *http.Request {
	u.Host = strings.TrimSuffix(u.Host, ":")
	out := &http.Request{Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: u.Host}
	switch {
	case body == nil:
	case len(body) == 0:
		out.Body = http.NoBody
		out.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	default:
		out.Body = newBodyReader(body)
		out.ContentLength = int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return newBodyReader(body), nil }
	}
	return out.WithContext(ctx)
}

// newBodyReader is the body http.NewRequest makes of a bytes.Reader: the
// transport knows an io.NopCloser of one as in-memory and sends it with
// the headers in one write.
func newBodyReader(body []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(body)) }

// cancelBody releases the attempt's context once the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (rt *Router) copyResponse(w *telemetry.StatusRecorder, resp *http.Response, home string) {
	defer resp.Body.Close()
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	removeHopHeaders(h)
	if v := rt.homeValues[home]; v != nil {
		h["X-Berth-Home-Region"] = v
	} else if home != "" {
		h.Set("X-Berth-Home-Region", home)
	}
	h["X-Berth-Router"] = rt.regionValue
	w.WriteHeader(resp.StatusCode)
	bp := rt.bufs.Get().(*[]byte)
	defer rt.bufs.Put(bp)
	if _, err := io.CopyBuffer(w, resp.Body, *bp); err != nil {
		// Headers are gone; all we can do is cut the response short.
		rt.log.Warn("copy upstream response", "err", err)
		panic(http.ErrAbortHandler)
	}
}
