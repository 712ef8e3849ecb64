package natsbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// orderedEnv is a JetStream on a server of its own, for the ordered
// consumer's tests.
func orderedEnv(t *testing.T) (*natstest.Server, jetstream.JetStream, context.Context) {
	t.Helper()
	srv := natstest.Start(t)
	nc, err := natsbus.Connect(srv.URL, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsbus.NewJetStream(nc, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	if _, err := natsbus.EnsureStream(ctx, js); err != nil {
		t.Fatal(err)
	}
	return srv, js, ctx
}

// publishEvent publishes event id on its own partition, again and again
// while the server is away (the relay's way: it retries the batch).
func publishEvent(ctx context.Context, t *testing.T, js jetstream.JetStream, i int) string {
	t.Helper()
	id := fmt.Sprintf("ev-%04d", i)
	body, _ := json.Marshal(events.Envelope{SpecVersion: events.SpecVersion, ID: id, Source: "test", Type: "reservation.held",
		Kind: "hotel", PartitionID: fmt.Sprintf("p%d", i%7), Data: json.RawMessage(`{}`)})
	for {
		msg := nats.NewMsg(events.Subject("hotel", fmt.Sprintf("p%d", i%7), "reservation.held"))
		msg.Data = body
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := js.PublishMsg(pctx, msg, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			return id
		}
		if ctx.Err() != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An ordered consumer has no acks and no state on the server's disk, yet
// loses no event while its process lives: events published before it
// started (from its StartTime) and while the NATS server restarts twice
// in the middle of the stream all reach the handler (the client recreates
// the consumer after the last message it received).
func TestOrderedConsumerLosesNothingAcrossServerRestarts(t *testing.T) {
	t.Parallel()
	srv, js, ctx := orderedEnv(t)
	const n = 300
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	start := time.Now().Add(-time.Second)
	want := map[string]bool{}
	for i := range n / 3 { // before the consumer exists
		want[publishEvent(ctx, t, js, i)] = true
	}
	go func() {
		_ = natsbus.Consume(ctx, js, natsbus.ConsumerConfig{Durable: "ordered-restart-test", Ordered: true, StartTime: start,
			Workers: 4, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
			func(_ context.Context, m natsbus.Message) error {
				mu.Lock()
				seen[m.Event.ID]++
				mu.Unlock()
				return nil
			})
	}()
	for i := n / 3; i < n; i++ {
		want[publishEvent(ctx, t, js, i)] = true
		if i == n/2 || i == 5*n/6 {
			srv.Restart()
		}
	}
	for {
		mu.Lock()
		missing := 0
		for id := range want {
			if seen[id] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d events never reached the handler", missing, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("the handler saw %d distinct events, want %d", len(seen), n)
	}
}

// An ordered consumer's retries hold its messages in the process, and no
// more than MaxAckPending of them at once (the bound the server keeps for
// a durable consumer's unacked messages): while the handler's dependency is
// down only that many are taken, and once it is back every event is
// handled.
func TestOrderedConsumerHoldsAtMostMaxAckPending(t *testing.T) {
	t.Parallel()
	_, js, ctx := orderedEnv(t)
	const n, bound = 40, 6
	for i := range n {
		publishEvent(ctx, t, js, i)
	}
	var (
		mu      sync.Mutex
		tried   = map[string]bool{}
		handled = map[string]bool{}
		down    = true
	)
	go func() {
		_ = natsbus.Consume(ctx, js, natsbus.ConsumerConfig{Durable: "ordered-bound-test", Ordered: true,
			Workers: 2, MaxAckPending: bound, Retry: func(uint64) time.Duration { return 20 * time.Millisecond },
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
			func(_ context.Context, m natsbus.Message) error {
				mu.Lock()
				defer mu.Unlock()
				tried[m.Event.ID] = true
				if down {
					return fmt.Errorf("cache down: %w", context.DeadlineExceeded)
				}
				handled[m.Event.ID] = true
				return nil
			})
	}()
	time.Sleep(time.Second) // dozens of retries of each message in hand
	mu.Lock()
	if len(tried) != bound {
		mu.Unlock()
		t.Fatalf("%d events taken while every one failed, want MaxAckPending = %d", len(tried), bound)
	}
	down = false
	mu.Unlock()
	for {
		mu.Lock()
		done := len(handled)
		mu.Unlock()
		if done == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d events handled after the dependency came back", done, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
