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
)

// An outage of the consumer's own dependency must never turn a good event
// into a dead letter: a handler failing transiently more often than
// MaxDeliver still gets the event once the dependency is back, while an
// event that fails on its own account is dead-lettered after MaxDeliver.
// The same holds for an ordered consumer, whose retries are its process's.
func TestTransientFailuresNeverDeadLetter(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			t.Parallel()
			testTransientFailuresNeverDeadLetter(t, ordered)
		})
	}
}

func testTransientFailuresNeverDeadLetter(t *testing.T, ordered bool) {
	srv := natstest.Start(t)
	nc, err := natsbus.Connect(srv.URL, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := natsbus.EnsureStream(ctx, js); err != nil {
		t.Fatal(err)
	}
	dlq, err := nc.SubscribeSync("berth.dlq.>")
	if err != nil {
		t.Fatal(err)
	}
	publish := func(id, typ string) {
		body, _ := json.Marshal(events.Envelope{SpecVersion: "1.0", ID: id, Type: typ, Data: json.RawMessage(`{}`)})
		msg := nats.NewMsg("berth.hotel.p1." + typ)
		msg.Data = body
		msg.Header.Set("Nats-Msg-Id", id)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	publish("good", "reservation.held")
	publish("poison", "reservation.confirmed")
	var (
		mu       sync.Mutex
		attempts = map[string]int{}
		handled  = make(chan string, 10)
	)
	errOutage := fmt.Errorf("database down: %w", context.DeadlineExceeded)
	go func() {
		_ = natsbus.Consume(ctx, js, natsbus.ConsumerConfig{Durable: "transient-test", MaxDeliver: 3, Workers: 2,
			Retry:   func(uint64) time.Duration { return 20 * time.Millisecond },
			Ordered: ordered,
			Log:     slog.New(slog.NewTextHandler(io.Discard, nil))},
			func(_ context.Context, m natsbus.Message) error {
				mu.Lock()
				attempts[m.Event.ID]++
				n := attempts[m.Event.ID]
				mu.Unlock()
				switch {
				case m.Event.ID == "poison":
					return fmt.Errorf("cannot project event")
				case n <= 8: // the outage outlasts MaxDeliver
					return errOutage
				}
				handled <- m.Event.ID
				return nil
			})
	}()
	select {
	case id := <-handled:
		if id != "good" {
			t.Fatalf("handled %q", id)
		}
	case <-ctx.Done():
		t.Fatal("the good event was never handled after the outage")
	}
	m, err := dlq.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("the poison event was not dead-lettered: %v", err)
	}
	var env events.Envelope
	_ = json.Unmarshal(m.Data, &env)
	if env.ID != "poison" {
		t.Fatalf("dead letter is %q, want the poison event", env.ID)
	}
	if extra, err := dlq.NextMsg(500 * time.Millisecond); err == nil {
		t.Fatalf("another dead letter: %s", extra.Subject)
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts["good"] != 9 || attempts["poison"] != 3 {
		t.Fatalf("attempts %v: want good 9 (8 transient failures, then success), poison 3", attempts)
	}
}

func TestParseSubject(t *testing.T) {
	pid := "0b6f3c1e-4a8e-4a57-9b0c-2f1d3e4a5b6c"
	kind, p, typ, err := natsbus.ParseSubject(events.Subject("hotel", pid, "reservation.held"))
	if err != nil || kind != "hotel" || p != pid || typ != "reservation.held" {
		t.Fatalf("got %q %q %q %v", kind, p, typ, err)
	}
	for _, bad := range []string{"", "berth.", "berth.hotel", "berth.hotel." + pid, "other.hotel." + pid + ".x", "berth..p.x"} {
		if _, _, _, err := natsbus.ParseSubject(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
