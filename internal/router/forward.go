package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/berth"
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
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// forward sends the request to target and copies the answer back.
//
//   - 421 misdirected (the partition moved): refresh the entry from the
//     database and re-send once to the new home. Nothing committed on a 421
//     (the fence refused inside the transaction), so this is always safe.
//   - connection error: re-send once when rte.mayRetry (reads; writes with an
//     Idempotency-Key, which the booking service deduplicates), else — or
//     when the retry fails too — 503 unavailable with Retry-After.
func (rt *Router) forward(w *statusWriter, r *http.Request, body []byte, target *url.URL, home string, rte route) {
	var resent421, retried bool
	for {
		resp, err := rt.send(r, body, target)
		if err != nil {
			if r.Context().Err() != nil {
				return // the client went away; nobody to answer
			}
			if rte.mayRetry && !retried {
				retried = true
				rt.metrics.retries.Add(1)
				select {
				case <-time.After(rt.cfg.RetryBackoff):
				case <-r.Context().Done():
					return
				}
				continue
			}
			rt.metrics.upstreamErrors.Add(1)
			rt.log.WarnContext(r.Context(), "upstream unavailable", "target", target.Host, "method", r.Method, "path", r.URL.Path, "err", err)
			rt.problem(w, r, &berth.Error{Code: berth.CodeUnavailable, RetryAfter: 2, Err: err,
				Detail: "the service for this request (" + target.Host + ") is unavailable; retry shortly"})
			return
		}
		if resp.StatusCode == http.StatusMisdirectedRequest && rte.kind != "" && !resent421 {
			resent421 = true
			rt.metrics.misdirected.Add(1)
			hint := misdirectedHome(resp)
			region, found, err := rt.cfg.Directory.Refresh(r.Context(), rte.kind, rte.id)
			if err != nil || !found {
				// The database could not tell; trust the booking service's
				// answer (it read the placement row inside its transaction).
				region = hint
			}
			if u := rt.bookings[region]; u != nil {
				target, home = u, region
				continue
			}
			rt.problem(w, r, &berth.Error{Code: berth.CodeUnavailable, Detail: "the partition's home region is not reachable from here", RetryAfter: 2})
			return
		}
		rt.copyResponse(w, resp, home)
		return
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
	u := *target
	u.Path = target.Path + r.URL.Path
	u.RawPath = ""
	if r.URL.RawPath != "" {
		u.RawPath = target.Path + r.URL.RawPath
	}
	u.RawQuery = r.URL.RawQuery
	// The attempt's deadline covers the wait for response headers; the body
	// copy that follows is bounded by the server's write timeout.
	ctx, cancel := context.WithTimeoutCause(r.Context(), rt.cfg.AttemptTimeout, errAttemptTimeout)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), rd)
	if err != nil {
		cancel()
		return nil, err
	}
	out.Header = r.Header.Clone()
	removeHopHeaders(out.Header)
	out.ContentLength = int64(len(body))
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		out.Header.Set("X-Forwarded-For", ip)
	}
	out.Header.Set("X-Forwarded-Host", r.Host)
	if r.TLS != nil {
		out.Header.Set("X-Forwarded-Proto", "https")
	} else {
		out.Header.Set("X-Forwarded-Proto", "http")
	}
	out.Header.Set("X-Berth-Router", rt.cfg.Region)
	resp, err := rt.transport.RoundTrip(out)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

var errAttemptTimeout = errors.New("upstream attempt timed out")

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

func (rt *Router) copyResponse(w *statusWriter, resp *http.Response, home string) {
	defer resp.Body.Close()
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	removeHopHeaders(h)
	if home != "" {
		h.Set("X-Berth-Home-Region", home)
	}
	h.Set("X-Berth-Router", rt.cfg.Region)
	w.WriteHeader(resp.StatusCode)
	bp := rt.bufs.Get().(*[]byte)
	defer rt.bufs.Put(bp)
	if _, err := io.CopyBuffer(w, resp.Body, *bp); err != nil {
		// Headers are gone; all we can do is cut the response short.
		rt.log.Warn("copy upstream response", "err", err)
		panic(http.ErrAbortHandler)
	}
}
