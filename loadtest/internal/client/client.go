// Package client is the loadtest's HTTP client of the Berth API: it knows
// the regional entry points (routers, or booking services while routers are
// absent), follows a 421 misdirected answer to the partition's home region
// like a router would, mints tokens, and turns every answer into an outcome
// name for the recorder.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
)

// Targets maps regions to base URLs.
type Targets struct {
	Regions []string          // in the order given
	URL     map[string]string // region → base URL
	Kind    map[string]string // region → "router" or "booking"
}

// ParseTargets parses "region=url,region=url".
func ParseTargets(s string) (Targets, error) {
	t := Targets{URL: map[string]string{}, Kind: map[string]string{}}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		region, url, ok := strings.Cut(part, "=")
		if !ok || region == "" || url == "" {
			return t, fmt.Errorf("want region=url, got %q", part)
		}
		if _, dup := t.URL[region]; !dup {
			t.Regions = append(t.Regions, region)
		}
		t.URL[region] = strings.TrimRight(url, "/")
	}
	return t, nil
}

// Healthy reports whether url answers GET /healthz with 200 within 2 s.
func Healthy(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// ResolveTargets picks, per region, the router when it answers /healthz,
// else the region's booking service. Regions with neither are left out and
// reported in notes.
func ResolveTargets(ctx context.Context, routers, bookings string) (Targets, []string, error) {
	r, err := ParseTargets(routers)
	if err != nil {
		return r, nil, fmt.Errorf("router urls: %w", err)
	}
	b, err := ParseTargets(bookings)
	if err != nil {
		return r, nil, fmt.Errorf("booking urls: %w", err)
	}
	out := Targets{URL: map[string]string{}, Kind: map[string]string{}}
	var notes []string
	regions := append(slices.Clone(r.Regions), b.Regions...)
	for _, region := range regions {
		if _, done := out.URL[region]; done {
			continue
		}
		switch {
		case r.URL[region] != "" && Healthy(ctx, r.URL[region]):
			out.URL[region], out.Kind[region] = r.URL[region], "router"
		case b.URL[region] != "" && Healthy(ctx, b.URL[region]):
			out.URL[region], out.Kind[region] = b.URL[region], "booking"
			notes = append(notes, fmt.Sprintf("region %s: router not answering, driving its booking service %s directly (421s followed client-side)", region, b.URL[region]))
		default:
			notes = append(notes, fmt.Sprintf("region %s: neither router nor booking service answers; left out", region))
			continue
		}
		out.Regions = append(out.Regions, region)
	}
	if len(out.Regions) == 0 {
		if len(regions) == 0 {
			return out, notes, errors.New("no platform address: set BERTH_ROUTER_URLS (region=url,…, as `make up` writes to .local/env) or pass --routers")
		}
		return out, notes, fmt.Errorf("no region answers /healthz (routers %q, booking services %q): is the platform up (`make up`)?", routers, bookings)
	}
	return out, notes, nil
}

// Client sends requests to the platform.
type Client struct {
	HTTP    *http.Client
	Targets Targets
	tokens  *auth.Tokens
	admin   string
	ops     string
	// guests caches the tokens of recent guests (guest id → token), at
	// most maxGuestTokens: a baseline invents a guest per hold, so an
	// unbounded cache grew with the run's length.
	guestsMu sync.Mutex
	guests   map[string]string
	// do sends Do's requests (HTTP's transport, no Timeout of its own);
	// timeout bounds each.
	do      *http.Client
	timeout time.Duration
	// Follows counts 421 answers followed to the home region.
	Follows atomic.Int64
}

// New returns a client. secret mints guest tokens; admin and ops tokens are
// taken from adminToken/opsToken or minted when empty.
func New(t Targets, secret, adminToken, opsToken string, timeout time.Duration) (*Client, error) {
	c := &Client{Targets: t, admin: adminToken, ops: opsToken}
	if secret != "" {
		tok, err := auth.New(secret)
		if err != nil {
			return nil, fmt.Errorf("token secret: %w", err)
		}
		c.tokens = tok
	}
	var err error
	if c.admin == "" {
		if c.admin, err = c.mint("loadtest-admin", berth.RoleAdmin); err != nil {
			return nil, err
		}
	}
	if c.ops == "" {
		if c.ops, err = c.mint("loadtest-ops", berth.RoleOps); err != nil {
			return nil, err
		}
	}
	tr := NewTransport()
	c.HTTP = &http.Client{Transport: tr, Timeout: timeout}
	// Do's requests carry their timeout in their context: http.Client's
	// own Timeout starts a goroutine and a timer per request for a
	// transport other than net/http's.
	c.do = &http.Client{Transport: tr}
	c.timeout = timeout
	return c, nil
}

func (c *Client) mint(sub string, role berth.Role) (string, error) {
	if c.tokens == nil {
		return "", fmt.Errorf("no BERTH_TOKEN_SECRET to mint a %s token", role)
	}
	tok, err := c.tokens.Mint(berth.Principal{Subject: sub, Role: role}, 12*time.Hour)
	if err != nil {
		return "", fmt.Errorf("mint %s token: %w", role, err)
	}
	return tok, nil
}

// Admin returns the admin token.
func (c *Client) Admin() string { return c.admin }

// Ops returns the ops token.
func (c *Client) Ops() string { return c.ops }

// maxGuestTokens bounds the guest tokens a Client keeps. A token costs
// about a microsecond to mint (auth.Tokens.Mint), so the cache saves little
// and must not grow with a long run's invented guests.
const maxGuestTokens = 1 << 16

// Guest returns a token for guest id: the same one while it is cached (at
// most maxGuestTokens guests; the cache starts over when full, and a guest
// then gets a new token, as valid as the first).
func (c *Client) Guest(id string) string {
	c.guestsMu.Lock()
	t, ok := c.guests[id]
	c.guestsMu.Unlock()
	if ok {
		return t
	}
	t, err := c.mint(id, berth.RoleGuest)
	if err != nil {
		return ""
	}
	c.guestsMu.Lock()
	if c.guests == nil || len(c.guests) >= maxGuestTokens {
		c.guests = make(map[string]string)
	}
	c.guests[id] = t
	c.guestsMu.Unlock()
	return t
}

// cachedGuests is how many guest tokens c keeps.
func (c *Client) cachedGuests() int {
	c.guestsMu.Lock()
	defer c.guestsMu.Unlock()
	return len(c.guests)
}

// Request is one call.
type Request struct {
	Region  string // entry region; "" = the first
	Method  string
	Path    string
	Token   string
	IdemKey string
	Body    any
	Header  map[string]string
}

// Response is a finished call.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Region is where the answer came from (after following a 421).
	Region string
}

// Code returns the problem code of an error answer, or "".
func (r Response) Code() string {
	if r.Status < 400 {
		return ""
	}
	var p struct {
		Code       string `json:"code"`
		HomeRegion string `json:"home_region"`
	}
	_ = json.Unmarshal(r.Body, &p)
	return p.Code
}

// Decode decodes the body into v.
func (r Response) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode %d answer: %w", r.Status, err)
	}
	return nil
}

// Outcome names an answer for the recorder: "ok" for 2xx, the problem code
// for a problem, "http_<status>" otherwise, "timeout" or "transport" for
// a failed call.
func Outcome(r Response, err error) string {
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return "timeout"
		}
		return "transport"
	}
	if r.Status >= 200 && r.Status < 300 {
		return "ok"
	}
	if code := r.Code(); code != "" {
		return code
	}
	return fmt.Sprintf("http_%d", r.Status)
}

// Do sends req and follows one 421 misdirected to the home region named in
// its body.
func (c *Client) Do(ctx context.Context, req Request) (Response, error) {
	if req.Region == "" || c.Targets.URL[req.Region] == "" {
		req.Region = c.Targets.Regions[0]
	}
	var body []byte
	if req.Body != nil {
		switch b := req.Body.(type) {
		case []byte:
			body = b
		default:
			var err error
			if body, err = json.Marshal(b); err != nil {
				return Response{}, fmt.Errorf("encode body: %w", err)
			}
		}
	}
	resp, err := c.send(ctx, req, body)
	if err == nil && resp.Status == http.StatusMisdirectedRequest {
		var p struct {
			HomeRegion string `json:"home_region"`
		}
		if json.Unmarshal(resp.Body, &p) == nil && p.HomeRegion != "" && p.HomeRegion != req.Region && c.Targets.URL[p.HomeRegion] != "" {
			c.Follows.Add(1)
			req.Region = p.HomeRegion
			return c.send(ctx, req, body)
		}
	}
	return resp, err
}

func (c *Client) send(ctx context.Context, req Request, body []byte) (Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, c.Targets.URL[req.Region]+req.Path, rd)
	if err != nil {
		return Response{}, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if req.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+req.Token)
	}
	if req.IdemKey != "" {
		hr.Header.Set("Idempotency-Key", req.IdemKey)
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	resp, err := c.do.Do(hr)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", req.Method, req.Path, err)
	}
	defer resp.Body.Close()
	data, err := readBody(resp)
	if err != nil {
		return Response{}, fmt.Errorf("read %s %s: %w", req.Method, req.Path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: data, Region: req.Region}, nil
}

// maxBody bounds what a response body may hold.
const maxBody = 4 << 20

// readBody reads a response's body, at most maxBody bytes. The platform
// answers with a Content-Length, so the body is read into a slice of its
// size at once, rather than grown from 512 bytes as io.ReadAll does (a
// copy and a cleared allocation per step, on every request).
func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= maxBody {
		data := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return nil, err
		}
		return data, nil
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxBody))
}

// Close releases idle connections.
func (c *Client) Close() { c.HTTP.CloseIdleConnections() }

// Dials is how many connections the client has opened to http:// targets
// so far (0 when its transport is not the generator's).
func (c *Client) Dials() uint64 {
	if t, ok := c.do.Transport.(*Transport); ok {
		return t.Dials()
	}
	return 0
}
