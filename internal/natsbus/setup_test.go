package natsbus_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/natsbus"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// A consumer whose setup request is never answered tries again: one
// attempt is bounded by the package's setup timeout, not by the caller's
// deadline, which the JetStream client would otherwise wait out. The
// server here has no JetStream, and a subscriber swallows every API
// request, as a server restarting between a request and its reply does.
func TestConsumerSetupGivesUpOnAnUnansweredRequest(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		name := map[bool]string{false: "durable", true: "ordered"}[ordered]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
			if err != nil {
				t.Fatal(err)
			}
			go srv.Start()
			if !srv.ReadyForConnections(10 * time.Second) {
				t.Fatal("nats server not ready")
			}
			t.Cleanup(srv.Shutdown)
			nc, err := nats.Connect(srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			var requests atomic.Int64
			if _, err := nc.Subscribe("$JS.API.>", func(*nats.Msg) { requests.Add(1) }); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			js, err := natsbus.NewJetStream(nc, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			// The caller's deadline is far past the setup timeout.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = natsbus.Consume(ctx, js, natsbus.ConsumerConfig{Durable: "setup-" + name, Ordered: ordered,
					Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
					func(context.Context, natsbus.Message) error { return nil })
			}()
			t.Cleanup(func() { cancel(); <-done })
			deadline := time.After(45 * time.Second)
			for requests.Load() < 2 {
				select {
				case <-deadline:
					t.Fatalf("%d setup request(s) in 45 s: the first unanswered one was never given up", requests.Load())
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
}
