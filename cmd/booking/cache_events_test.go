package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/rediscache/redistest"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// A booking service's cached reads of a hotel are dropped by the events of
// writes made by other processes (another region's service, another
// replica): the service's one consumer for the search index and the cache
// (docs/adr/0019) invalidates the region's Redis on each event. A service
// started after such an event — within a cache TTL — drops them too: its
// consumer, new with the process, replays the events of the last TTL. The
// TTL is ten minutes here and a Redis call may take five seconds (a call
// past its bound reads the database: a miss), so only an invalidation can
// turn a hit into a miss within the test.
func TestCacheFollowsOtherProcessesEvents(t *testing.T) {
	ns := natstest.Start(t)
	rs := redistest.Start(t)
	t.Setenv("BERTH_CACHE_TTL", "10m")
	t.Setenv("BERTH_CACHE_TIMEOUT", "5s")
	s := startServiceWith(t, serviceOptions{natsURL: ns.URL, redisURL: rs.URL()})
	h := s.SeedHotel("", 5, 0, bookingtest.Date(0), bookingtest.Date(60))
	path := "/v1/hotels/" + h.ID + "/availability?check_in=" + bookingtest.Date(30) + "&check_out=" + bookingtest.Date(32)
	hit := func(s *service) bool {
		t.Helper()
		r := s.Do(bookingtest.Request{Method: "GET", Path: path})
		if r.Status != http.StatusOK {
			t.Fatalf("availability: %d %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Cache") == "hit"
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	nc, err := nats.Connect(ns.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// settled: every event written so far is published and handled by the
	// service's consumer (the seeding's own events invalidate too).
	settled := func() bool {
		var unsent int
		if err := dbtest.SQL(s.DB).QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(context.Background(), natsbus.StreamName)
		if err != nil || unsent > 0 {
			return false
		}
		for name := range st.ConsumerNames(context.Background()).Name() {
			if strings.HasPrefix(name, "search-cache-") {
				if n, err := natsbus.Pending(context.Background(), js, name); err != nil || n > 0 {
					return false
				}
			}
		}
		return true
	}
	until("the seeding's events handled", settled)
	until("a cached read", func() bool { return hit(s) })
	version := int64(1000)
	publish := func(id string) {
		t.Helper()
		version++
		// A hold made by another process (an event no other consumer of
		// this service takes: the waitlist's take the freeing ones).
		payload, _ := json.Marshal(map[string]any{"reservation_id": uuid.NewString(), "hotel_id": h.ID,
			"inventory": reservation.InventoryChange{HotelID: h.ID, RoomTypeID: h.RoomTypeID,
				Nights: []reservation.NightCount{{Night: bookingtest.Date(50), Available: 3, Version: version}}}})
		body, _ := json.Marshal(events.FromRecord(events.Record{PartitionID: h.ID, EventID: id, Kind: "hotel",
			Type: reservation.EventHeld, AggregateID: h.ID, AggregateVersion: 1, Payload: payload, CreatedAt: time.Now()}))
		msg := nats.NewMsg(events.Subject("hotel", h.ID, reservation.EventHeld))
		msg.Data = body
		msg.Header.Set("Nats-Msg-Id", id)
		msg.Header.Set(natsbus.RegionHeader, "us-east")
		if _, err := js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	// Another process's write: its event reaches this service's consumer.
	publish(uuid.NewString())
	until("the cached read dropped by another process's event", func() bool { return !hit(s) })
	until("the event handled", settled)
	until("a cached read again", func() bool { return hit(s) })

	// The service stops; a write elsewhere happens while it is down; the
	// service starts again over the same database, NATS and Redis.
	s.stop()
	if err := <-s.exited; err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.exited <- nil // for the cleanup of startServiceWith
	publish(uuid.NewString())
	again := startServiceWith(t, serviceOptions{natsURL: ns.URL, redisURL: rs.URL(), db: s.DB, dbURL: s.DBURL})
	until("the cached read dropped by the event published while the service was down", func() bool { return !hit(again) })
}
