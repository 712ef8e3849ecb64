// Package router is Berth's edge: an HTTP reverse proxy, one per region, that
// finds the partition of a request from its path (or, for payment webhooks,
// from the body), sends writes to the partition's home region and reads to
// its own region, and turns a down region into a prompt 503 — never a hang.
// The home comes from the placement directory (internal/placement); a 421
// misdirected from a booking service refreshes that entry and the request is
// re-sent once. The booking service's fence, not this cache, is what keeps
// two regions from writing one partition.
package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/clientip"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/telemetry"
)

// DefaultMaxBodyBytes bounds request bodies the router buffers.
const DefaultMaxBodyBytes = 1 << 20

// Config wires a Router.
type Config struct {
	Region string
	// Bookings maps every region to its booking service's base URL.
	Bookings map[string]string
	// ReadModel is the read model's base URL; "" answers /v1/guests/* 503.
	ReadModel string
	Directory *placement.Directory
	Logger    *slog.Logger
	// MaxBodyBytes bounds request bodies (default 1 MiB); larger is 413.
	MaxBodyBytes int64
	// Transport sends upstream requests (default NewTransport()).
	Transport http.RoundTripper
	// AttemptTimeout bounds one upstream attempt up to its response
	// headers (default 30s; the booking service's own statement timeouts
	// are far shorter).
	AttemptTimeout time.Duration
	// RetryBackoff is the pause before re-sending after a connection error
	// (default 50ms), and the longest pause between following two 421s.
	RetryBackoff time.Duration
	// FollowMovesFor bounds how long one request keeps following 421s
	// (the partition moving again and again under it) before the client is
	// answered 503 with Retry-After (default 10s).
	FollowMovesFor time.Duration
	// Ready, when set, is part of /readyz (e.g. the directory's database).
	Ready func(context.Context) error
	// Writes, when set, is told of every client write of a known partition
	// (not payment webhooks): where the partition's guests are, for
	// placement by origin.
	Writes WriteCounter
	// TrustedProxies are the proxies in front of the router whose
	// X-Forwarded-For is passed on (BERTH_TRUSTED_PROXIES); from any other
	// peer only its own address is.
	TrustedProxies clientip.Proxies
}

// WriteCounter tallies the writes entering through this router, by
// partition. Count must not block (internal/origins counts in memory);
// Stats reports how many times the tallies were saved and failed to be.
type WriteCounter interface {
	Count(kind berth.Kind, id string)
	Stats() (flushed, failed uint64)
}

// NewTransport returns the upstream transport: keep-alive with many idle
// connections per booking service (a router talks to three hosts), short
// dial and response-header timeouts so a dead region fails fast, and no
// transparent compression (bodies pass through untouched).
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          2048,
		MaxIdleConnsPerHost:   512,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 20 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}
}

// Router is the edge handler of one region.
type Router struct {
	cfg       Config
	log       *slog.Logger
	bookings  map[string]*url.URL
	readModel *url.URL
	transport http.RoundTripper
	metrics   *metrics
	bufs      sync.Pool
	// regionValue and homeValues are the values of X-Berth-Router and
	// X-Berth-Home-Region, made once and shared read-only by every request
	// (see send).
	regionValue []string
	homeValues  map[string][]string
}

// New validates cfg and returns a Router.
func New(cfg Config) (*Router, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 30 * time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 50 * time.Millisecond
	}
	if cfg.FollowMovesFor <= 0 {
		cfg.FollowMovesFor = 10 * time.Second
	}
	if cfg.Transport == nil {
		cfg.Transport = NewTransport()
	}
	if cfg.Directory == nil {
		return nil, errors.New("router: a placement directory is required")
	}
	rt := &Router{cfg: cfg, log: cfg.Logger, bookings: map[string]*url.URL{}, transport: cfg.Transport, metrics: newMetrics(),
		regionValue: []string{cfg.Region}, homeValues: map[string][]string{}}
	rt.bufs.New = func() any { b := make([]byte, 32<<10); return &b }
	for region, raw := range cfg.Bookings {
		u, err := parseBase(raw)
		if err != nil {
			return nil, fmt.Errorf("booking URL of %s: %w", region, err)
		}
		rt.bookings[region] = u
		rt.homeValues[region] = []string{region}
	}
	if rt.bookings[cfg.Region] == nil {
		return nil, fmt.Errorf("router: no booking URL for its own region %s", cfg.Region)
	}
	if cfg.ReadModel != "" {
		u, err := parseBase(cfg.ReadModel)
		if err != nil {
			return nil, fmt.Errorf("read model URL: %w", err)
		}
		rt.readModel = u
	}
	return rt, nil
}

func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q: want http(s)://host[:port]", raw)
	}
	return u, nil
}

// route is where one request goes and why.
type route struct {
	class string // read, write, local, readmodel, webhook (metrics)
	// kind and id name the partition, when the request has one.
	kind berth.Kind
	id   string
	// toHome: the request goes to the partition's home region (a write),
	// not to this region.
	toHome bool
	// mayRetry: a connection error may be retried (reads, and writes that
	// carry an Idempotency-Key so the booking service dedups them).
	mayRetry bool
}

func isRead(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// WriteMetrics writes the router's own counters as Prometheus text.
func (rt *Router) WriteMetrics(w io.Writer) {
	rt.metrics.write(w, rt.cfg.Directory.Stats(), rt.cfg.Writes)
}

// ServeHTTP routes one request.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &telemetry.StatusRecorder{ResponseWriter: w}
	class := rt.serve(sw, r)
	rt.metrics.observe(class, sw.Status, time.Since(start))
}

func (rt *Router) serve(w *telemetry.StatusRecorder, r *http.Request) string {
	path := r.URL.Path
	switch path {
	case "/healthz":
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "region": rt.cfg.Region, "service": "router"})
		return "own"
	case "/readyz":
		rt.readyz(w, r)
		return "own"
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		rt.WriteMetrics(w)
		return "own"
	}
	// Hostile bytes stop at the platform's edge, with the booking service's
	// own check (httpapi.CheckRequest), before an upstream sees them.
	if err := httpapi.CheckRequest(r); err != nil {
		rt.problem(w, r, err)
		return "rejected"
	}
	body, ok := rt.readBody(w, r)
	if !ok {
		return "rejected"
	}
	hasKey := r.Header.Get("Idempotency-Key") != ""
	switch {
	case path == "/v1/guests" || strings.HasPrefix(path, "/v1/guests/"):
		if rt.readModel == nil {
			rt.problem(w, r, &berth.Error{Code: berth.CodeUnavailable, Detail: "the read model is not configured", RetryAfter: 5})
			return "readmodel"
		}
		rt.forward(w, r, body, rt.readModel, "", route{class: "readmodel", mayRetry: isRead(r.Method)})
		return "readmodel"
	case path == "/v1/payments/webhook" && r.Method == http.MethodPost:
		kind, id := webhookPartition(body)
		rt.toHome(w, r, body, route{class: "webhook", kind: kind, id: id})
		return "webhook"
	case path == "/v1/payments/stripe/webhook" && r.Method == http.MethodPost:
		kind, id := stripeWebhookPartition(body)
		rt.toHome(w, r, body, route{class: "webhook", kind: kind, id: id})
		return "webhook"
	}
	kind, id, _ := httpapi.PartitionPath(path)
	switch {
	case kind == "":
		// No partition yet (POST /v1/hotels, search, /v1/placements): local.
		rt.forward(w, r, body, rt.bookings[rt.cfg.Region], "", route{class: "local", mayRetry: isRead(r.Method) || hasKey})
		return "local"
	case isRead(r.Method):
		home, _, _, _ := rt.resolve(r.Context(), kind, id)
		rt.forward(w, r, body, rt.bookings[rt.cfg.Region], home, route{class: "read", kind: kind, id: id, mayRetry: true})
		return "read"
	default:
		rt.toHome(w, r, body, route{class: "write", kind: kind, id: id, mayRetry: hasKey})
		return "write"
	}
}

// toHome forwards a write to the partition's home region. An unknown
// partition goes to the local booking service, which answers 404.
func (rt *Router) toHome(w *telemetry.StatusRecorder, r *http.Request, body []byte, rte route) {
	target, home := rt.bookings[rt.cfg.Region], ""
	if rte.kind != "" {
		region, found, known, err := rt.resolve(r.Context(), rte.kind, rte.id)
		if err != nil && !known {
			rt.log.WarnContext(r.Context(), "placement lookup failed", "kind", rte.kind, "partition_id", rte.id, "err", err)
			rt.problem(w, r, &berth.Error{Code: berth.CodeUnavailable, Detail: "the placement directory is unavailable", RetryAfter: 2, Err: err})
			return
		}
		if found {
			if rt.cfg.Writes != nil && rte.class == "write" {
				rt.cfg.Writes.Count(rte.kind, rte.id)
			}
			u := rt.bookings[region]
			if u == nil {
				rt.problem(w, r, &berth.Error{Code: berth.CodeUnavailable, Detail: "no route to region " + region, RetryAfter: 5})
				return
			}
			target, home = u, region
		}
	}
	rte.toHome = true
	rt.forward(w, r, body, target, home, rte)
}

// resolve returns the partition's home region: found reports the partition
// exists, known that the answer is usable (no error).
func (rt *Router) resolve(ctx context.Context, kind berth.Kind, id string) (region string, found, known bool, err error) {
	region, found, err = rt.cfg.Directory.Resolve(ctx, kind, id)
	return region, found, err == nil, err
}

// webhookPartition parses only data.kind and data.partition_id of a payment
// webhook body; anything else is the booking service's to judge.
func webhookPartition(body []byte) (berth.Kind, string) {
	var ev struct {
		Data struct {
			Kind        string `json:"kind"`
			PartitionID string `json:"partition_id"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil || !berth.Kind(ev.Data.Kind).Valid() || ev.Data.PartitionID == "" {
		return "", ""
	}
	return berth.Kind(ev.Data.Kind), strings.ToLower(ev.Data.PartitionID)
}

// stripeWebhookPartition finds the partition of a Stripe event about a
// PaymentIntent Berth created: its metadata names it. Only for routing — the
// booking service asks Stripe for the intent, and its fence answers 421
// when the body named the wrong home.
func stripeWebhookPartition(body []byte) (berth.Kind, string) {
	var ev struct {
		Data struct {
			Object struct {
				Metadata struct {
					Kind        string `json:"berth_kind"`
					PartitionID string `json:"berth_partition_id"`
				} `json:"metadata"`
			} `json:"object"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil {
		return "", ""
	}
	md := ev.Data.Object.Metadata
	if !berth.Kind(md.Kind).Valid() || md.PartitionID == "" {
		return "", ""
	}
	return berth.Kind(md.Kind), strings.ToLower(md.PartitionID)
}

// readBody buffers the request body, at most MaxBodyBytes (else 413), so a
// write can be re-sent after a 421 or a connection error.
func (rt *Router) readBody(w *telemetry.StatusRecorder, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	if r.ContentLength > rt.cfg.MaxBodyBytes {
		rt.tooLarge(w)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rt.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			rt.tooLarge(w)
			return nil, false
		}
		rt.problem(w, r, berth.Invalid(berth.FieldError{Field: "body", Message: "could not be read"}))
		return nil, false
	}
	return body, true
}

func (rt *Router) tooLarge(w http.ResponseWriter) {
	doc, _ := json.Marshal(map[string]any{
		"type": "https://berth.dev/problems/invalid_request", "title": http.StatusText(http.StatusRequestEntityTooLarge),
		"status": http.StatusRequestEntityTooLarge, "code": berth.CodeInvalidRequest,
		"detail": fmt.Sprintf("the request body is larger than %d bytes", rt.cfg.MaxBodyBytes),
	})
	w.Header().Set("Content-Type", httpapi.ProblemContentType)
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = w.Write(doc)
}

func (rt *Router) problem(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("X-Berth-Router", rt.cfg.Region)
	httpapi.WriteProblem(w, r, rt.log, err)
}

func (rt *Router) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var err error
	if !rt.cfg.Directory.Loaded() {
		err = errors.New("the placement directory is not loaded yet")
	} else if rt.cfg.Ready != nil {
		err = rt.cfg.Ready(ctx)
	}
	if err != nil {
		rt.log.WarnContext(r.Context(), "not ready", "err", err)
		httpapi.WriteProblem(w, r, nil, &berth.Error{Code: berth.CodeUnavailable, Detail: "not ready", RetryAfter: 2, Err: err})
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready", "region": rt.cfg.Region, "service": "router"})
}
