package searchindex_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/searchindex"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// stack is a booking server whose GET /v1/hotels is answered by a search
// index fed through real events: the booking store writes the outbox, the
// relay publishes it to an in-process JetStream server, and the index's own
// consumer applies it. Nothing is mocked.
type stack struct {
	*bookingtest.Env
	t       *testing.T
	idx     *searchindex.Index
	js      jetstream.JetStream
	durable string
	admin   string
}

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	idx := searchindex.New(log)
	env := bookingtest.Start(t, bookingtest.Options{Configure: func(c *httpapi.Config, store *postgres.Store) {
		c.Search = idx
		c.SearchAdmin = admin{idx: idx, start: func() error { return idx.StartBuild(ctx, store) }}
	}})
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	relay := natsbus.NewRelay(js, env.Store, natsbus.RelayConfig{Region: "us-east", Poll: 10 * time.Millisecond, Log: log})
	cfg := searchindex.ConsumerConfig("us-east", uuid.NewString()[:8], log)
	relayDone, runDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(relayDone); relay.Run(ctx) }()
	go func() {
		defer close(runDone)
		if err := idx.Run(ctx, js, cfg, env.Store); err != nil {
			t.Errorf("search run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-relayDone
		<-runDone
		nc.Close()
		_ = idx.Close()
	})
	s := &stack{Env: env, t: t, idx: idx, js: js, durable: cfg.Durable, admin: env.Admin()}
	s.eventually("the first build", func() bool { return idx.Ready() })
	return s
}

// eventually polls cond for up to 30 s (a loaded machine under -race).
func (s *stack) eventually(what string, cond func() bool) {
	s.t.Helper()
	s.eventuallyWithin(what, 30*time.Second, cond)
}

func (s *stack) eventuallyWithin(what string, d time.Duration, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settle waits until every event written so far is published and applied:
// after it, a search that misses a hotel misses it for good.
func (s *stack) settle() {
	s.t.Helper()
	s.eventually("the outbox and the consumer to drain", func() bool {
		var unsent int
		if err := dbtest.SQL(s.DB).QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil {
			s.t.Fatal(err)
		}
		if unsent > 0 {
			return false
		}
		n, err := natsbus.Pending(context.Background(), s.js, s.durable)
		return err == nil && n == 0
	})
}

type hotelSpec struct {
	Name, City, Country string
	Lat, Lon            *float64
	Amenities           []string
	Rooms               []roomSpec
}

type roomSpec struct {
	Name      string
	MaxGuests int
	Price     int64
	Total     int // rooms per night over the next 30 nights
}

func ll(lat, lon float64) (*float64, *float64) { return &lat, &lon }

// createHotel creates a hotel, its room types and their nights via the API.
func (s *stack) createHotel(h hotelSpec) (id string, rooms []string) {
	s.t.Helper()
	body := map[string]any{"name": h.Name, "city": h.City, "country": h.Country, "timezone": "Europe/Berlin", "home_region": "us-east"}
	if h.Lat != nil {
		body["latitude"], body["longitude"] = *h.Lat, *h.Lon
	}
	if h.Amenities != nil {
		body["amenities"] = h.Amenities
	}
	r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels", Token: s.admin, Body: body})
	if r.Status != http.StatusCreated {
		s.t.Fatalf("create hotel: %d %s", r.Status, r.Body)
	}
	id = r.JSON()["hotel_id"].(string)
	for _, rt := range h.Rooms {
		r = s.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + id + "/room-types", Token: s.admin, Body: map[string]any{
			"name": rt.Name, "max_guests": rt.MaxGuests, "price_cents": rt.Price, "currency": "EUR", "overbooking_pct": 0}})
		if r.Status != http.StatusCreated {
			s.t.Fatalf("create room type: %d %s", r.Status, r.Body)
		}
		rid := r.JSON()["room_type_id"].(string)
		rooms = append(rooms, rid)
		s.setRooms(id, rid, 0, 30, rt.Total)
	}
	return id, rooms
}

func (s *stack) setRooms(hotelID, roomTypeID string, from, to, total int) {
	s.t.Helper()
	r := s.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + hotelID + "/room-types/" + roomTypeID + "/inventory",
		Token: s.admin, Body: map[string]any{"from": bookingtest.Date(from), "to": bookingtest.Date(to), "total_rooms": total}})
	if r.Status != http.StatusOK {
		s.t.Fatalf("set inventory: %d %s", r.Status, r.Body)
	}
}

type result struct {
	Hotels []struct {
		ID         string   `json:"hotel_id"`
		Name       string   `json:"name"`
		City       string   `json:"city"`
		Amenities  []string `json:"amenities"`
		DistanceKm *float64 `json:"distance_km"`
		RoomTypes  []struct {
			ID         string `json:"room_type_id"`
			Available  *int   `json:"available"`
			PriceCents int64  `json:"price_cents"`
		} `json:"room_types"`
	} `json:"hotels"`
	NextCursor *string `json:"next_cursor"`
}

func (r result) names() []string {
	out := make([]string, len(r.Hotels))
	for i, h := range r.Hotels {
		out[i] = h.Name
	}
	return out
}

// search sends GET /v1/hotels with params and wants a 200.
func (s *stack) search(params url.Values) result {
	s.t.Helper()
	r := s.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels?" + params.Encode()})
	if r.Status != http.StatusOK {
		s.t.Fatalf("search %s: %d %s", params.Encode(), r.Status, r.Body)
	}
	var res result
	if err := json.Unmarshal(r.Body, &res); err != nil {
		s.t.Fatal(err)
	}
	return res
}

func q(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// admin is the httpapi.SearchAdmin the booking service wires.
type admin struct {
	idx   *searchindex.Index
	start func() error
}

func (a admin) Rebuild() error                 { return a.start() }
func (a admin) Progress() searchindex.Progress { return a.idx.Progress() }
func (a admin) Stats() searchindex.Stats       { return a.idx.Stats() }
