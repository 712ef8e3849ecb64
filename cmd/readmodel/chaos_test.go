package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/notify"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// chaosPause is how long the read model stays down: 30 s with
// BERTH_CHAOS_FULL=1, a few seconds in the default run.
func chaosPause() time.Duration {
	if os.Getenv("BERTH_CHAOS_FULL") != "" {
		return 30 * time.Second
	}
	return 3 * time.Second
}

// Chaos: the us-east relay is killed between PubAck and mark-sent, NATS is
// restarted in the middle of the burst, and the read model is down for a
// while as bookings continue. Afterwards every outbox event is in the
// stream exactly once, no notification went out twice, and verify finds no
// difference between the view and the booking tables.
func TestChaos(t *testing.T) {
	s := newStack(t)
	killed := make(chan struct{})
	var kills atomic.Int32
	s.startRelay("us-east", func(ctx context.Context, recs []events.Record) error {
		if kills.Add(1) == 1 {
			close(killed)
			return errors.New("relay killed after publish, before mark-sent")
		}
		return nil
	})
	s.startRelay("eu-west", nil)
	s.startRelay("ap-south", nil)
	dir := t.TempDir()
	counter := &countingSender{sent: map[string]int{}, tried: map[string]int{}}
	rmConfig := func(c *serveConfig) {
		c.Notify = notifyConfig{Sender: "dev", Dir: dir, ReminderInterval: time.Hour, DispatchInterval: 50 * time.Millisecond,
			Wrap: func(next notify.Sender) notify.Sender { counter.next = next; return counter }}
	}
	s.startReadModel(rmConfig)

	hotels := map[string]bookingtest.Hotel{}
	for _, r := range berth.Regions() {
		hotels[r] = s.regions[r].SeedHotel(r, 500, 0, bookingTestFrom, bookingTestTo)
	}
	// The burst: each region books, confirms and sometimes cancels while
	// the faults are injected below.
	var (
		wg   sync.WaitGroup
		stop atomic.Bool
		made atomic.Int64
	)
	for _, r := range berth.Regions() {
		for w := range 4 {
			wg.Go(func() {
				for i := 0; !stop.Load() && i < 400; i++ {
					env := s.regions[r]
					b := hold(t, env, hotels[r], "chaos-guest-"+r, 2+(w*7+i)%40)
					act(t, env, b, "confirm")
					if i%5 == 0 {
						act(t, env, b, "cancel")
					}
					made.Add(1)
				}
			})
		}
	}
	// Fault 1: kill the us-east relay between publish and mark-sent, restart it.
	select {
	case <-killed:
	case <-time.After(20 * time.Second):
		t.Fatal("the relay never published")
	}
	s.stopRelay("us-east")
	s.startRelay("us-east", nil)
	// Fault 2: restart NATS mid-burst.
	time.Sleep(300 * time.Millisecond)
	s.nats.Restart()
	// Fault 3: the read model goes away while bookings continue.
	time.Sleep(300 * time.Millisecond)
	s.stopReadModel()
	time.Sleep(chaosPause())
	s.startReadModel(rmConfig)
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	t.Logf("bookings made during chaos: %d", made.Load())

	// Everything reached the stream.
	eventually(t, 60*time.Second, "every outbox row sent", func() bool {
		var n int
		_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&n)
		return n == 0
	})
	nc, err := nats.Connect(s.nats.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsbus.NewJetStream(nc, 5*time.Second)
	inStream := streamEventIDs(t, js)
	rows, err := dbtest.SQL(s.db).Query(context.Background(), `SELECT event_id::TEXT FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		total++
		switch inStream[id] {
		case 1:
		case 0:
			t.Errorf("event %s never reached the stream", id)
		default:
			t.Errorf("event %s is in the stream %d times", id, inStream[id])
		}
	}
	rows.Close()
	if kills.Load() == 0 || total == 0 {
		t.Fatal("the chaos did not happen")
	}
	// The consumers caught up; nothing was applied or sent twice.
	for _, c := range []string{"readmodel", "notify"} {
		eventually(t, 60*time.Second, c+" caught up", func() bool {
			p, err := natsbus.Pending(context.Background(), js, c)
			return err == nil && p == 0
		})
	}
	var applied int
	_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FROM rm_processed_events WHERE consumer = 'readmodel'`).Scan(&applied)
	if applied != total {
		t.Errorf("read model applied %d events, outbox has %d", applied, total)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var pending int
		_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*) FROM notify_messages WHERE status <> 'sent'`).Scan(&pending)
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 60s waiting for notifications sent; %d are not:\n%s", pending, unsentNotifications(t, s))
		}
	}
	counter.mu.Lock()
	for k, c := range counter.sent {
		if c != 1 {
			t.Errorf("notification %s sent %d times", k, c)
		}
	}
	counter.mu.Unlock()
	t.Setenv("BERTH_DATABASE_URL", s.dbURL)
	var out strings.Builder
	if err := verify(context.Background(), &out); err != nil {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	t.Logf("events: %d, all in the stream once; verify: %s", total, out.String())
}

// streamEventIDs counts each event id among the stream's booking events.
func streamEventIDs(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	ctx := context.Background()
	cons, err := js.OrderedConsumer(ctx, natsbus.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: natsbus.EventSubjects})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	remaining := int(info.NumPending)
	ids := map[string]int{}
	for remaining > 0 {
		batch, err := cons.Fetch(min(remaining, 500), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			var e struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(m.Data(), &e)
			ids[e.ID]++
			got++
		}
		if got == 0 {
			t.Fatalf("stream read stalled with %d to go", remaining)
		}
		remaining -= got
	}
	return ids
}

// unsentNotifications describes up to ten messages of the queue that were
// not sent, for a failure message: what they are and why they wait.
func unsentNotifications(t *testing.T, s *stack) string {
	t.Helper()
	rows, err := dbtest.SQL(s.db).Query(context.Background(), `SELECT message_key, channel, status, attempts,
		coalesce(last_error, ''), extract(epoch FROM next_attempt_at - now())::INT8
		FROM notify_messages WHERE status <> 'sent' ORDER BY next_attempt_at LIMIT 10`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out strings.Builder
	for rows.Next() {
		var (
			key, channel, status, lastErr string
			attempts                      int32
			dueIn                         int64
		)
		if err := rows.Scan(&key, &channel, &status, &attempts, &lastErr, &dueIn); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&out, "  %s %s: %s after %d attempt(s), due in %d s, last error %q\n", key, channel, status, attempts, dueIn, lastErr)
	}
	return out.String()
}
