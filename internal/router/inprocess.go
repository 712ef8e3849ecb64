package router

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
)

// InProcess returns an upstream transport for a router that runs in the
// same process as its region's booking service (the "together" layout,
// ADR 0022): a request to base — the booking service's own URL, as named in
// Config.Bookings — is served by handler on the calling goroutine, without
// a socket or a second HTTP parse; every other request goes to next.
//
// The router cannot tell the two apart: it builds the same request (hop
// headers stripped, X-Forwarded-*, X-Berth-Router, trace context when this
// transport sits under telemetry.HopTransport), and it reads the answer as
// it reads one off the network, so placement, the 421 follow-the-move loop,
// retries, limits, metrics and problem answers are the router's own in both
// layouts. handler is the booking service's complete handler (its
// telemetry, its token, ownership and fence checks): the in-process path
// is a shorter wire, not a way around any check.
//
// The answer is buffered whole before the router sees it, which a booking
// service's answers (bounded pages, problem documents) allow; nothing it
// serves streams. A panic that escapes handler (http.ErrAbortHandler, or
// one outside the API's own recovery) is what a dropped connection is over
// the network: an error, which the router answers 503 (or retries when it
// may), never a crash of the process.
func InProcess(handler http.Handler, base string, next http.RoundTripper, log *slog.Logger) (http.RoundTripper, error) {
	u, err := parseBase(base)
	if err != nil {
		return nil, fmt.Errorf("in-process booking URL: %w", err)
	}
	if handler == nil {
		return nil, errors.New("in-process: a booking handler is required")
	}
	if next == nil {
		next = NewTransport()
	}
	if log == nil {
		log = slog.Default()
	}
	return &inProcess{handler: handler, scheme: u.Scheme, host: u.Host, next: next, log: log}, nil
}

type inProcess struct {
	handler      http.Handler
	scheme, host string
	next         http.RoundTripper
	log          *slog.Logger
}

// errLocalAborted is the in-process twin of a connection the upstream cut.
var errLocalAborted = errors.New("the in-process booking handler aborted the request")

func (t *inProcess) RoundTrip(r *http.Request) (resp *http.Response, err error) {
	if r.URL.Host != t.host || r.URL.Scheme != t.scheme {
		return t.next.RoundTrip(r)
	}
	// The request as a server would have read it: a path-only URL, the
	// RequestURI, Host as the client of the hop sent it, and a body that is
	// never nil. The header map is the one the router built for this
	// attempt (send clones it per attempt); nobody else holds it.
	in := r.WithContext(r.Context())
	in.URL = &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	in.RequestURI = in.URL.RequestURI()
	in.Host = r.URL.Host
	in.Proto, in.ProtoMajor, in.ProtoMinor = "HTTP/1.1", 1, 1
	// The router is the booking service's peer, on this host; nothing in
	// the booking service trusts a peer address (clients are told apart by
	// their verified tokens, and only the router reads X-Forwarded-For).
	in.RemoteAddr = "127.0.0.1:0"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}}
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				t.log.ErrorContext(r.Context(), "panic in the in-process booking handler", "panic", v, "stack", string(debug.Stack()))
			}
			resp, err = nil, errLocalAborted
		}
	}()
	t.handler.ServeHTTP(rec, in)
	return rec.response(in), nil
}

// recorder is the ResponseWriter of an in-process request: the status,
// the headers as they were when the status was written, and the body.
type recorder struct {
	header  http.Header
	sent    http.Header // the header snapshot taken at WriteHeader
	status  int
	body    recordedBody
	written bool
}

// recordedBody is the answer's body as the router reads it back: the
// buffer, nothing to close (io.NopCloser's allocation saved).
type recordedBody struct{ bytes.Buffer }

func (*recordedBody) Close() error { return nil }

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.written || status < 200 {
		// A second WriteHeader is ignored, as net/http's server does; an
		// informational answer (1xx) is not the final one.
		return
	}
	w.written, w.status = true, status
	// Later changes to the header map no longer reach the client over the
	// network; they do not here either.
	w.sent = w.header.Clone()
}

func (w *recorder) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	return w.body.Write(p)
}

// Flush is a no-op: the answer goes to the router whole.
func (w *recorder) Flush() {}

// response is the answer as the router's transport would have read it,
// with what net/http's server adds for a handler that did not: a sniffed
// Content-Type for a body without one, and the body's length.
func (w *recorder) response(r *http.Request) *http.Response {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	h := w.sent
	n := int64(w.body.Len())
	if bodyAllowed(w.status) && r.Method != http.MethodHead {
		if n > 0 && h.Get("Content-Type") == "" && h.Get("Content-Encoding") == "" {
			h.Set("Content-Type", http.DetectContentType(w.body.Bytes()))
		}
		if h.Get("Content-Length") == "" {
			h.Set("Content-Length", strconv.FormatInt(n, 10))
		}
	}
	return &http.Response{
		Status:     statusLine(w.status),
		StatusCode: w.status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          &w.body,
		ContentLength: n,
		Request:       r,
	}
}

// statusLines are the Status of a response ("201 Created") for every code
// net/http names, made once rather than per answer.
var statusLines = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			m[code] = strconv.Itoa(code) + " " + text
		}
	}
	return m
}()

// statusLine is strconv.Itoa(code) + " " + http.StatusText(code).
func statusLine(code int) string {
	if s, ok := statusLines[code]; ok {
		return s
	}
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// bodyAllowed reports whether a response of this status may have a body
// (RFC 9110: not 1xx, 204 or 304).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

var _ http.Flusher = (*recorder)(nil)
