package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// Drained is false while a message its filter matches is stored and not
// acked (before any fetch, and while delivered), true once it is acked,
// and not moved by messages outside the filter.
func TestDrained(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := natstest.Start(t)
	nc, err := natsbus.Connect(ns.URL, "natstest", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := natsbus.EnsureConsumer(ctx, js, natsbus.ConsumerConfig{Durable: "d", Filters: []string{"berth.hotel.*.walk.>"}})
	if err != nil {
		t.Fatal(err)
	}
	drained := func() bool {
		t.Helper()
		ok, err := natstest.Drained(ctx, js, natsbus.StreamName, "d")
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !drained() {
		t.Fatal("an empty stream: not drained")
	}
	if _, err := js.Publish(ctx, "berth.hotel.h1.walk.requested", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if drained() {
		t.Fatal("drained with a stored message never fetched")
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 1 {
		t.Fatalf("fetched %d messages; want 1 (%v)", len(msgs), batch.Error())
	}
	if drained() {
		t.Fatal("drained with a message delivered and not acked")
	}
	if err := msgs[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if !drained() {
		t.Fatal("not drained after the only message was acked")
	}
	if _, err := js.Publish(ctx, "berth.hotel.h1.reservation.held", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if !drained() {
		t.Fatal("a message outside the filter made it not drained")
	}
	if _, err := natstest.Drained(ctx, js, natsbus.StreamName, "nobody"); err == nil {
		t.Fatal("no error for a consumer that does not exist")
	}
}
