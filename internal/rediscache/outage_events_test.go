package rediscache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/rediscache/redistest"
	"github.com/nats-io/nats.go"
)

// Redis stops in the middle of a burst of events and comes back seconds
// later — far more failures per event than MaxDeliver, first refused
// connections, then the breaker open. The region's cache-invalidation
// consumer must dead-letter nothing and, once Redis is back, invalidate
// every partition once per event: no invalidation lost. Writes' own
// invalidations go on meanwhile, as a booking service's do: their rounds
// take the lingering events' calls along, and fail with them while Redis
// is down (ADR 0026); those events are retried like the others.
func TestRedisOutageDuringBurstDeadLettersNothing(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t) // a Redis of this test's own, on its own port
	cache := newCache(t, redis.URL(), rediscache.Options{Timeout: 50 * time.Millisecond, Cooldown: 100 * time.Millisecond})
	srv := natstest.Start(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nc, err := natsbus.Connect(srv.URL, "test", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := natsbus.EnsureStream(ctx, js); err != nil {
		t.Fatal(err)
	}
	dlq, err := nc.SubscribeSync("berth.dlq.>")
	if err != nil {
		t.Fatal(err)
	}
	// Start the consumer (DeliverNew) before the burst, and wait until it
	// is there, so it sees every event.
	go func() { _ = natsbus.InvalidateCache(ctx, js, "test", cache.Events(), quiet) }()
	for {
		if _, err := js.Consumer(ctx, natsbus.StreamName, "cache-test"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the invalidation consumer never started")
		case <-time.After(20 * time.Millisecond):
		}
	}

	const partitions, burst = 20, 200
	publish := func(i int) {
		id := fmt.Sprintf("ev-%03d", i)
		pid := fmt.Sprintf("00000000-0000-0000-0000-%012d", i%partitions)
		body, _ := json.Marshal(events.Envelope{SpecVersion: events.SpecVersion, ID: id, Source: "test", Type: "reservation.held", Kind: "hotel",
			PartitionID: pid, Data: json.RawMessage(`{}`)})
		msg := nats.NewMsg(events.Subject("hotel", pid, "reservation.held"))
		msg.Data = body
		msg.Header.Set("Nats-Msg-Id", id)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	writes := make(chan struct{})
	go func() {
		defer close(writes)
		for i := 0; ctx.Err() == nil; i++ {
			pid := fmt.Sprintf("00000000-0000-0000-0000-%012d", i%partitions)
			_ = cache.Invalidate(ctx, "hotel", pid) // a write's: its failure is left to the events
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	for i := range burst / 4 {
		publish(i)
	}
	redis.Stop()
	for i := burst / 4; i < burst; i++ {
		publish(i)
	}
	// The outage outlasts MaxDeliver (5) by far: every retry of the events
	// in flight fails, and the breaker opens.
	time.Sleep(3 * time.Second)
	down := cache.Stats()
	redis.Restart()

	for cache.Stats().EventInvalidations < burst {
		select {
		case <-ctx.Done():
			t.Fatalf("after the outage %d of %d events invalidated (stats %+v)", cache.Stats().EventInvalidations, burst, cache.Stats())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	<-writes
	if down.InvalidateErr == 0 {
		t.Fatalf("no invalidation failed during the outage (stats %+v): the test did not test an outage", down)
	}
	if m, err := dlq.NextMsg(time.Second); err == nil {
		t.Fatalf("a dead letter: %s %s (failed invalidations during the outage: %d)", m.Subject, m.Data, down.InvalidateErr)
	}
	if s := cache.Stats(); s.Invalidations == s.EventInvalidations || s.BumpRounds == s.EventRounds {
		t.Fatalf("stats %+v: no write's invalidation went through: the test did not race writes' rounds with the events", s)
	}
	t.Logf("during the outage: %d failed invalidations, breaker %s; after: %d invalidations (%d of events), no dead letter",
		down.InvalidateErr, down.Breaker, cache.Stats().Invalidations, cache.Stats().EventInvalidations)
}
