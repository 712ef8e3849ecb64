package natsbus_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/nats-io/nats.go"
)

// A published placement.moved event reaches the applier; malformed ones are
// skipped without stopping the follower.
func TestFollowPlacements(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 10)
	apply := func(kind berth.Kind, id, region string, version int64) bool {
		got <- string(kind) + " " + id + " " + region
		return true
	}
	done := make(chan error, 1)
	go func() {
		done <- natsbus.FollowPlacements(ctx, srv.URL, apply, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	data, _ := json.Marshal(map[string]any{"kind": "hotel", "partition_id": "p1", "from_region": "us-east", "to_region": "eu-west", "version": 2})
	good, _ := json.Marshal(events.Envelope{SpecVersion: "1.0", ID: "e1", Type: "placement.moved", Data: data})
	deadline := time.After(10 * time.Second)
	for {
		// The subscription may not be live yet: publish until it is seen.
		_ = nc.Publish("berth.hotel.p1.placement.moved", []byte("not json"))
		_ = nc.Publish("berth.hotel.p1.placement.moved", good)
		select {
		case g := <-got:
			if g != "hotel p1 eu-west" {
				t.Fatalf("applied %q", g)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no placement.moved applied")
		}
	}
}
