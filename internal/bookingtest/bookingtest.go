// Package bookingtest starts a real booking HTTP server on a fresh, migrated
// PostgreSQL database for tests, with helpers to mint tokens, seed a catalog
// and send requests. Nothing in it is a mock: requests travel over loopback
// HTTP into the same handlers and store the service runs.
package bookingtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// Secret is the token secret of test servers.
const Secret = "test-secret-test-secret-test-secret!"

// DevIntentSecret signs the development payment provider's intents in
// test servers (BERTH_DEV_INTENT_SECRET); servers sharing a database share it.
const DevIntentSecret = "test-dev-intent-secret-test-dev-intent-secret"

// NewDevPayments returns the development payment provider of test servers.
func NewDevPayments(t testing.TB, db *postgres.DB) *postgres.DevPaymentProvider {
	t.Helper()
	p, err := postgres.NewDevPaymentProvider(db, DevIntentSecret)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Options configure a test server.
type Options struct {
	Region  string // default us-east
	DB      postgres.Options
	HoldTTL time.Duration
	// GuestLimits replaces berth.DefaultGuestLimits when set.
	GuestLimits berth.GuestLimits
	// Configure may adjust the httpapi.Config before the server starts
	// (e.g. to add clinic routes).
	Configure func(*httpapi.Config, *postgres.Store)
}

// Env is a running booking server and its database.
type Env struct {
	T     testing.TB
	URL   string
	DB    *postgres.DB
	DBURL string
	Store *postgres.Store
	// Payments is the development payment provider the server verifies
	// guests' payments with; PayHold pays through it.
	Payments *postgres.DevPaymentProvider
	Tokens   *auth.Tokens
	Client   *http.Client
	Server   *httptest.Server
}

// Start starts a booking server on a fresh database.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Region == "" {
		opts.Region = "us-east"
	}
	db, url := dbtest.New(t, opts.DB)
	return StartOn(t, db, url, opts)
}

// StartOn starts a booking server of opts.Region on an existing database
// (several regions may share one).
func StartOn(t testing.TB, db *postgres.DB, dbURL string, opts Options) *Env {
	t.Helper()
	if opts.Region == "" {
		opts.Region = "us-east"
	}
	tokens, err := auth.New(Secret)
	if err != nil {
		t.Fatal(err)
	}
	store := postgres.NewStore(db, opts.Region, opts.HoldTTL)
	if opts.GuestLimits != (berth.GuestLimits{}) {
		store.SetGuestLimits(opts.GuestLimits)
	}
	provider := NewDevPayments(t, db)
	cfg := httpapi.Config{
		Region: opts.Region, Hotels: store, Stays: store, Waitlist: store, Tokens: tokens, Ready: db.Ping, PaymentProvider: provider,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if opts.Configure != nil {
		opts.Configure(&cfg, store)
	}
	srv := httptest.NewServer(httpapi.New(cfg))
	t.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &Env{T: t, URL: srv.URL, DB: db, DBURL: dbURL, Store: store, Tokens: tokens, Payments: provider,
		Client: &http.Client{Transport: tr, Timeout: 60 * time.Second}, Server: srv}
}

var _ httpapi.PaymentProvider = (*postgres.DevPaymentProvider)(nil)
var _ httpapi.DevPayer = (*postgres.DevPaymentProvider)(nil)

// PayHold pays the payment intent of a prepaid hold's answer with the
// development provider, as the guest would on the provider's page, and
// returns the intent id: the payment_ref a guest confirms with.
func (e *Env) PayHold(hold Response) string {
	e.T.Helper()
	pay, _ := hold.JSON()["payment"].(map[string]any)
	id, _ := pay["intent_id"].(string)
	secret, _ := pay["client_secret"].(string)
	if id == "" || secret == "" {
		e.T.Fatalf("the hold's answer names no payment intent: %d %s", hold.Status, hold.Body)
	}
	if _, _, err := e.Payments.Pay(context.Background(), id, secret, payments.IntentSucceeded); err != nil {
		e.T.Fatalf("pay %s: %v", id, err)
	}
	return id
}

// Token mints a token for a principal.
func (e *Env) Token(sub string, role berth.Role, partitions ...string) string {
	tok, err := e.Tokens.Mint(berth.Principal{Subject: sub, Role: role, Partitions: partitions}, time.Hour)
	if err != nil {
		e.T.Fatal(err)
	}
	return tok
}

// Admin returns an admin token.
func (e *Env) Admin() string { return e.Token("test-admin", berth.RoleAdmin) }

// Response is a finished request.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r Response) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Code returns the problem code of an error response, or "".
func (r Response) Code() string {
	c, _ := r.JSON()["code"].(string)
	return c
}

// Request is what Do sends.
type Request struct {
	Method, Path string
	Token        string
	IdemKey      string
	Body         any    // encoded as JSON unless it is []byte or string
	ContentType  string // default application/json when there is a body
	Header       map[string]string
}

// Do sends a request and reads the whole answer. Transport errors fail the test.
func (e *Env) Do(req Request) Response {
	e.T.Helper()
	r, err := e.Try(context.Background(), req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	return r
}

// Try is Do that returns transport errors (safe from any goroutine).
func (e *Env) Try(ctx context.Context, req Request) (Response, error) {
	var body io.Reader
	switch b := req.Body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	case string:
		body = bytes.NewReader([]byte(b))
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		body = bytes.NewReader(data)
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, e.URL+req.Path, body)
	if err != nil {
		return Response{}, err
	}
	if body != nil {
		ct := req.ContentType
		if ct == "" {
			ct = "application/json"
		}
		hr.Header.Set("Content-Type", ct)
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
	resp, err := e.Client.Do(hr)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// Hotel is a seeded hotel with one room type.
type Hotel struct {
	ID, RoomTypeID string
}

// SeedHotel creates a hotel homed in region (default: the server's) with
// one room type of totalRooms rooms over [from, to) via the API.
func (e *Env) SeedHotel(region string, totalRooms, overbookingPct int, from, to string) Hotel {
	e.T.Helper()
	if region == "" {
		region = e.Store.Region()
	}
	admin := e.Admin()
	r := e.Do(Request{Method: "POST", Path: "/v1/hotels", Token: admin, Body: map[string]any{
		"name": "Test Hotel", "city": "Múnich", "country": "DE", "timezone": "Europe/Berlin", "home_region": region}})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create hotel: %d %s", r.Status, r.Body)
	}
	h := Hotel{ID: r.JSON()["hotel_id"].(string)}
	if region != e.Store.Region() {
		return h
	}
	r = e.Do(Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/room-types", Token: admin, Body: map[string]any{
		"name": "Double", "max_guests": 2, "price_cents": 10000, "currency": "EUR", "overbooking_pct": overbookingPct}})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create room type: %d %s", r.Status, r.Body)
	}
	h.RoomTypeID = r.JSON()["room_type_id"].(string)
	r = e.Do(Request{Method: "PUT", Path: "/v1/hotels/" + h.ID + "/room-types/" + h.RoomTypeID + "/inventory", Token: admin,
		Body: map[string]any{"from": from, "to": to, "total_rooms": totalRooms}})
	if r.Status != http.StatusOK {
		e.T.Fatalf("set inventory: %d %s", r.Status, r.Body)
	}
	return h
}

// NewKey returns a fresh Idempotency-Key.
func NewKey() string { return uuid.NewString() }

// Date returns the date n days from today (UTC) as YYYY-MM-DD.
func Date(n int) string { return time.Now().UTC().AddDate(0, 0, n).Format("2006-01-02") }

// SeedRooms adds n physical rooms to the hotel's room type, numbered
// prefix+"01", prefix+"02", …, and returns their ids in that order.
func (e *Env) SeedRooms(h Hotel, prefix string, n int) []string {
	e.T.Helper()
	ids := make([]string, 0, n)
	for i := range n {
		r := e.Do(Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/rooms", Token: e.Admin(), Body: map[string]any{
			"room_type_id": h.RoomTypeID, "number": fmt.Sprintf("%s%02d", prefix, i+1), "floor": 1}})
		if r.Status != http.StatusCreated {
			e.T.Fatalf("create room: %d %s", r.Status, r.Body)
		}
		ids = append(ids, r.JSON()["room_id"].(string))
	}
	return ids
}
