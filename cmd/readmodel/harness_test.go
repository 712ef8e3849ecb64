package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
)

// stack is three booking regions on one database, a relay per region, an
// in-process NATS server and (once started) the read model.
type stack struct {
	t       *testing.T
	db      *postgres.DB
	dbURL   string
	nats    *natstest.Server
	regions map[string]*bookingtest.Env
	relays  map[string]*relayRun
	rm      *readmodelRun
	quiet   *slog.Logger
}

type relayRun struct {
	relay  *natsbus.Relay
	cancel context.CancelFunc
	done   chan struct{}
}

type readmodelRun struct {
	url    string
	cancel context.CancelFunc
	done   chan error
}

func newStack(t *testing.T) *stack { t.Helper(); return newStackTTL(t, 0) }

// newStackTTL is newStack with a hold TTL (0: the default).
func newStackTTL(t *testing.T, holdTTL time.Duration) *stack {
	t.Helper()
	db, url := dbtest.New(t, postgres.Options{MaxConns: 64})
	s := &stack{t: t, db: db, dbURL: url, nats: natstest.Start(t), regions: map[string]*bookingtest.Env{},
		relays: map[string]*relayRun{}, quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, r := range berth.Regions() {
		s.regions[r] = bookingtest.StartOn(t, db, url, bookingtest.Options{Region: r, HoldTTL: holdTTL})
	}
	t.Cleanup(func() {
		s.stopReadModel()
		for r := range s.relays {
			s.stopRelay(r)
		}
	})
	return s
}

// startRelay starts the relay of a region; hook (may be nil) runs between
// PubAck and mark-sent.
func (s *stack) startRelay(region string, hook func(context.Context, []events.Record) error) *natsbus.Relay {
	s.t.Helper()
	nc, err := natsbus.Connect(s.nats.URL, "relay-"+region, s.quiet)
	if err != nil {
		s.t.Fatal(err)
	}
	js, err := natsbus.NewJetStream(nc, 2*time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	cfg := natsbus.RelayConfig{Region: region, Poll: 10 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Log: s.quiet}
	var out natsbus.Outbox = s.regions[region].Store
	if hook != nil {
		out = hookedOutbox{Outbox: out, afterPublish: hook}
	}
	relay := natsbus.NewRelay(js, out, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	rr := &relayRun{relay: relay, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rr.done)
		defer nc.Close()
		relay.Run(ctx)
	}()
	s.relays[region] = rr
	return relay
}

// hookedOutbox runs afterPublish once the broker acknowledged a batch and
// before the batch is marked sent; an error abandons the batch as a crash
// would (the chaos tests kill the relay at that worst moment).
type hookedOutbox struct {
	natsbus.Outbox
	afterPublish func(ctx context.Context, recs []events.Record) error
}

func (o hookedOutbox) RelayOutbox(ctx context.Context, limit int,
	publish func(ctx context.Context, recs []events.Record) ([]string, error)) (int, error) {
	return o.Outbox.RelayOutbox(ctx, limit, func(ctx context.Context, recs []events.Record) ([]string, error) {
		acked, err := publish(ctx, recs)
		if ctx.Err() != nil {
			return acked, err
		}
		if herr := o.afterPublish(ctx, recs); herr != nil {
			return nil, herr
		}
		return acked, err
	})
}

func (s *stack) stopRelay(region string) {
	if rr := s.relays[region]; rr != nil {
		rr.cancel()
		<-rr.done
		delete(s.relays, region)
	}
}

func (s *stack) startReadModel(tweak func(*serveConfig)) {
	s.t.Helper()
	cfg := serveConfig{Addr: "127.0.0.1:0", DatabaseURL: s.dbURL, NATSURL: s.nats.URL, TokenSecret: bookingtest.Secret,
		TokenMaxTTL: auth.DefaultMaxLifetime, Workers: 8, MaxDeliver: 5, ShutdownTimeout: 5 * time.Second, LogFormat: "text",
		Notify: notifyConfig{Sender: "none"}}
	if tweak != nil {
		tweak(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	rm := &readmodelRun{cancel: cancel, done: make(chan error, 1)}
	go func() { rm.done <- run(ctx, cfg, io.Discard, ready) }()
	select {
	case addr := <-ready:
		rm.url = "http://" + addr
	case err := <-rm.done:
		s.t.Fatalf("readmodel: %v", err)
	case <-time.After(30 * time.Second):
		s.t.Fatal("readmodel did not start")
	}
	s.rm = rm
	s.waitReady()
}

func (s *stack) waitReady() {
	s.t.Helper()
	for range 300 {
		resp, err := http.Get(s.rm.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatal("readmodel not ready")
}

func (s *stack) stopReadModel() {
	if s.rm != nil {
		s.rm.cancel()
		if err := <-s.rm.done; err != nil {
			s.t.Errorf("readmodel run: %v", err)
		}
		s.rm = nil
	}
}

type pageItem struct {
	Kind        string `json:"kind"`
	PartitionID string `json:"partition_id"`
	ID          string `json:"id"`
	Status      string `json:"status"`
	Start       string `json:"start"`
	End         string `json:"end"`
	Title       string `json:"title"`
	UpdatedAt   string `json:"updated_at"`
}

type page struct {
	Items      []pageItem `json:"items"`
	NextCursor *string    `json:"next_cursor"`
}

// get sends a GET to the read model with the given headers.
func (s *stack) get(path string, hdr map[string]string) (int, http.Header, []byte) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.rm.url+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

func (s *stack) list(path, key string) page {
	s.t.Helper()
	status, _, body := s.get(path, map[string]string{"X-API-Key": key})
	if status != http.StatusOK {
		s.t.Fatalf("GET %s: %d %s", path, status, body)
	}
	var p page
	if err := json.Unmarshal(body, &p); err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	return p
}

// booking is one hotel reservation a test made.
type booking struct {
	region, hotelID, id, guestID string
	paymentRef                   string // the paid intent of the hold
}

// hold books one room for guest in a hotel of env; it fails the test on a
// non-201.
func hold(t testing.TB, env *bookingtest.Env, h bookingtest.Hotel, guest string, day int) booking {
	t.Helper()
	r, err := env.Try(context.Background(), bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
		Token: env.Token(guest, berth.RoleGuest), IdemKey: bookingtest.NewKey(), Body: map[string]any{
			"guest_id": guest, "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(day), "check_out": bookingtest.Date(day + 2),
			"quantity": 1, "contact_email": guest + "@example.test"}})
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("hold: %v %d %s", err, r.Status, r.Body)
	}
	// The guest pays the hold's intent with the provider; act confirms with it.
	p, _ := r.JSON()["payment"].(map[string]any)
	ref, _ := p["intent_id"].(string)
	secret, _ := p["client_secret"].(string)
	if _, _, err := env.Payments.Pay(context.Background(), ref, secret, payments.IntentSucceeded); err != nil {
		t.Fatalf("pay the hold: %v", err)
	}
	return booking{region: env.Store.Region(), hotelID: h.ID, id: r.JSON()["reservation_id"].(string), guestID: guest, paymentRef: ref}
}

func act(t testing.TB, env *bookingtest.Env, b booking, action string) {
	t.Helper()
	body := map[string]any{}
	if action == "confirm" {
		body["payment_ref"] = b.paymentRef
	}
	r, err := env.Try(context.Background(), bookingtest.Request{Method: "POST",
		Path:  fmt.Sprintf("/v1/hotels/%s/reservations/%s/%s", b.hotelID, b.id, action),
		Token: env.Token(b.guestID, berth.RoleGuest), IdemKey: bookingtest.NewKey(), Body: body})
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("%s: %v %d %s", action, err, r.Status, r.Body)
	}
}

// partnerKey creates a partner and has each of guests grant it access with
// their own token, through the read model's API; it returns the key.
func (s *stack) partnerKey(guests ...string) string {
	s.t.Helper()
	p, key, err := postgres.NewReadModel(s.db).CreatePartner(context.Background(), "test-partner")
	if err != nil {
		s.t.Fatal(err)
	}
	for _, g := range guests {
		if st, body := s.send(http.MethodPut, "/v1/guests/"+g+"/partners/"+p.ID, s.guestAuth(g)); st != http.StatusOK {
			s.t.Fatalf("%s grants the partner: %d %s", g, st, body)
		}
	}
	return key
}

// guestAuth is the Authorization header of guest's own token.
func (s *stack) guestAuth(guest string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + s.regions["us-east"].Token(guest, berth.RoleGuest)}
}

// send sends a request without a body to the read model.
func (s *stack) send(method, path string, hdr map[string]string) (int, []byte) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.rm.url+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// eventually polls cond every 50ms until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
