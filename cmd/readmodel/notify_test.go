package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/notify"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// countingSender counts deliveries per (key, channel) and fails the first
// attempt of every other message, so retries are exercised too.
type countingSender struct {
	next  notify.Sender
	mu    sync.Mutex
	sent  map[string]int
	tried map[string]int
}

func (c *countingSender) Send(ctx context.Context, m notify.Message) error {
	k := m.Key + "/" + m.Channel
	c.mu.Lock()
	c.tried[k]++
	fail := c.tried[k] == 1 && len(c.tried)%2 == 0
	c.mu.Unlock()
	if fail {
		return errors.New("provider hiccup")
	}
	if err := c.next.Send(ctx, m); err != nil {
		return err
	}
	c.mu.Lock()
	c.sent[k]++
	c.mu.Unlock()
	return nil
}

// Exactly one confirmation per confirmed booking even though every event
// is delivered three times (the same CloudEvent republished under new
// message ids, which the broker cannot dedup) and sends fail at first.
func TestOneConfirmationPerBookingDespiteRedeliveries(t *testing.T) {
	s := newStack(t)
	s.startRelay("us-east", nil)
	dir := t.TempDir()
	counter := &countingSender{sent: map[string]int{}, tried: map[string]int{}}
	s.startReadModel(func(c *serveConfig) {
		c.Notify = notifyConfig{Sender: "dev", Dir: dir, ReminderInterval: time.Hour, DispatchInterval: 50 * time.Millisecond,
			Wrap: func(next notify.Sender) notify.Sender { counter.next = next; return counter }}
	})
	env := s.regions["us-east"]
	h := env.SeedHotel("", 50, 0, bookingTestFrom, bookingTestTo)
	const n = 12
	var bs []booking
	for i := range n {
		b := hold(t, env, h, "guest-n", 5+i%10)
		act(t, env, b, "confirm")
		bs = append(bs, b)
	}
	for _, b := range bs[:3] {
		act(t, env, b, "cancel")
	}
	// Redeliver every event twice more, once all are published.
	eventually(t, 20*time.Second, "outbox published", func() bool {
		n, err := env.Store.UnsentOutbox(context.Background())
		return err == nil && n == 0
	})
	nc, err := nats.Connect(s.nats.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsbus.NewJetStream(nc, 5*time.Second)
	rows, err := dbtest.SQL(s.db).Query(context.Background(), `SELECT event_id::TEXT FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	stream, err := natsbus.EnsureStream(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= uint64(len(ids)); seq++ {
		raw, err := stream.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			// No Nats-Msg-Id: the broker stores it again, the consumers see it again.
			if _, err := js.Publish(context.Background(), raw.Subject, raw.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, 60*time.Second, "12 confirmations and 3 cancellations sent", func() bool {
		var sent, pending int
		_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'sent'), count(*) FILTER (WHERE status <> 'sent') FROM notify_messages`).Scan(&sent, &pending)
		return sent == n+3 && pending == 0
	})
	// Let the redelivered copies drain through the consumer, then check.
	eventually(t, 20*time.Second, "notify consumer drained", func() bool {
		p, err := natsbus.Pending(context.Background(), js, notify.ConsumerName)
		return err == nil && p == 0
	})
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if len(counter.sent) != n+3 {
		t.Fatalf("%d distinct messages sent, want %d", len(counter.sent), n+3)
	}
	retried := 0
	for k, c := range counter.sent {
		if c != 1 {
			t.Errorf("%s sent %d times", k, c)
		}
		if counter.tried[k] > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Error("no send was retried; the test lost its teeth")
	}
	files, _ := os.ReadDir(dir)
	confirmations := 0
	for _, f := range files {
		b, _ := os.ReadFile(dir + "/" + f.Name())
		if strings.Contains(string(b), "Template: confirmation") {
			confirmations++
		}
	}
	if confirmations != n {
		t.Fatalf("%d confirmation files, want %d", confirmations, n)
	}
}

// A poison message is retried up to the limit, then lands on the
// dead-letter subject, and does not hold up the events behind it.
func TestPoisonMessageIsDeadLettered(t *testing.T) {
	s := newStack(t)
	s.startRelay("us-east", nil)
	s.startReadModel(nil)
	key := s.partnerKey("guest-p")
	nc, err := nats.Connect(s.nats.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	dlq := make(chan *nats.Msg, 10)
	sub, err := nc.ChanSubscribe("berth.dlq.readmodel.>", dlq)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	js, _ := natsbus.NewJetStream(nc, 5*time.Second)
	poisonSubject := "berth.hotel." + uuid.NewString() + ".reservation.held"
	if _, err := js.Publish(context.Background(), poisonSubject, []byte(`{"specversion":"1.0","id":"x","type":"reservation.held","source":"s","kind":"hotel","data":{"reservation_id":42}}`)); err != nil {
		t.Fatal(err)
	}
	env := s.regions["us-east"]
	h := env.SeedHotel("", 5, 0, bookingTestFrom, bookingTestTo)
	b := hold(t, env, h, "guest-p", 3)
	eventually(t, 20*time.Second, "the booking behind the poison message", func() bool {
		return len(s.list("/v1/guests/guest-p/reservations", key).Items) == 1
	})
	select {
	case m := <-dlq:
		if m.Subject != "berth.dlq.readmodel.hotel."+strings.TrimPrefix(poisonSubject, "berth.hotel.") {
			t.Errorf("dead letter on %s", m.Subject)
		}
		if m.Header.Get("Berth-Dlq-Deliveries") != "5" || m.Header.Get("Berth-Dlq-Reason") == "" {
			t.Errorf("dead letter headers %v", m.Header)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no dead letter")
	}
	act(t, env, b, "confirm")
	eventually(t, 20*time.Second, "later events still flow", func() bool {
		items := s.list("/v1/guests/guest-p/reservations", key).Items
		return len(items) == 1 && items[0].Status == "confirmed"
	})
}
