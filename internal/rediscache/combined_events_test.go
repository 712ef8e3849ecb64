package rediscache_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/rediscache/redistest"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// One consumer per booking service does two jobs per event: the region's
// cache invalidation and the search index (natsbus.WithInvalidation). A
// failure of either job must lose neither job's work:
//
//   - Redis stops taking writes in the middle of a burst (paused, so the
//     entries filled before survive): the other job goes on applying events
//     meanwhile, and once Redis is back every event's partition has been
//     invalidated, with no dead letter;
//   - the other job fails transiently on some events (its index busy) and
//     for good on one (a poison event, dead-lettered after MaxDeliver):
//     each of those events' partitions is invalidated all the same, and each
//     transiently failing event is applied once the job recovers.
//
// Each event has a partition of its own, with a cached entry filled before
// any event: an entry still cached at the end is an invalidation lost.
//
// It runs with the consumer durable (acks, the server's redeliveries) and
// ordered (no acks, the process's own retries: what the booking services
// run, docs/adr/0024).
func TestCombinedConsumerLosesNeitherJob(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			t.Parallel()
			testCombinedConsumerLosesNeitherJob(t, ordered)
		})
	}
}

func testCombinedConsumerLosesNeitherJob(t *testing.T, ordered bool) {
	rs := redistest.Start(t)
	cache := newCache(t, rs.URL(), rediscache.Options{Timeout: 50 * time.Millisecond, Cooldown: 100 * time.Millisecond})
	ro, err := redis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(ro)
	defer admin.Close()
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

	const burst = 60
	pid := func(i int) string { return fmt.Sprintf("00000000-0000-0000-0000-%012d", i) }
	const poison = 13
	busy := func(i int) bool { return i%7 == 3 } // the other job fails these three times first
	fetch := func(i int, value string) (body []byte, hit bool) {
		t.Helper()
		body, hit, err := cache.Fetch(ctx, "hotel", pid(i), "availability", time.Minute,
			func(context.Context) ([]byte, error) { return []byte(value), nil })
		if err != nil {
			t.Fatal(err)
		}
		return body, hit
	}
	// Fill every partition's entry before any event. On a loaded machine a
	// fill can outlast the 50 ms bound (and open the breaker for its
	// cooldown): the cache then answers without storing, so fill again
	// until the entry is there.
	for i := range burst {
		for deadline := time.Now().Add(30 * time.Second); ; {
			fetch(i, "before")
			if _, hit := fetch(i, "before"); hit {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d: the fill was never cached (cache %+v)", i, cache.Stats())
			}
			time.Sleep(150 * time.Millisecond) // past the breaker's cooldown
		}
	}

	var (
		mu       sync.Mutex
		tries    = map[string]int{}
		applied  = map[string]int{}
		paused   bool
		inPause  = map[string]bool{} // events published during the pause and applied before its end
		pauseEnd time.Time
	)
	job := func(_ context.Context, m natsbus.Message) error {
		_, p, _, err := natsbus.ParseSubject(m.Subject)
		if err != nil {
			return err
		}
		var i int
		if _, err := fmt.Sscanf(p[len(p)-12:], "%d", &i); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		tries[p]++
		switch {
		case i == poison:
			return errors.New("cannot apply this event")
		case busy(i) && tries[p] <= 3:
			return fmt.Errorf("index busy: %w", context.DeadlineExceeded)
		}
		applied[p]++
		if paused && i >= burst/3 && time.Now().Before(pauseEnd) {
			inPause[p] = true
		}
		return nil
	}
	cfg := natsbus.ConsumerConfig{Durable: "combined-test", SubjectOnly: true, MaxDeliver: 3,
		Workers: 4, Retry: func(uint64) time.Duration { return 50 * time.Millisecond }, Log: quiet}
	if ordered {
		// Created when Consume runs, at a time before the first event.
		cfg.Ordered, cfg.StartTime = true, time.Now().Add(-time.Second)
	}
	go func() { _ = natsbus.Consume(ctx, js, cfg, natsbus.WithInvalidation(cache.Events(), job)) }()
	for !ordered {
		if _, err := js.Consumer(ctx, natsbus.StreamName, "combined-test"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the consumer never started")
		case <-time.After(20 * time.Millisecond):
		}
	}
	publish := func(i int) {
		id := fmt.Sprintf("ev-%03d", i)
		body, _ := json.Marshal(events.Envelope{SpecVersion: events.SpecVersion, ID: id, Source: "test", Type: "reservation.held",
			Kind: "hotel", PartitionID: pid(i), Data: json.RawMessage(`{}`)})
		msg := nats.NewMsg(events.Subject("hotel", pid(i), "reservation.held"))
		msg.Data = body
		msg.Header.Set("Nats-Msg-Id", id)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}

	for i := range burst / 3 {
		publish(i)
	}
	// Writes wait while paused: every bump times out (50 ms), the breaker
	// opens, and each event's invalidation fails far more often than
	// MaxDeliver.
	const pause = 3 * time.Second
	mu.Lock()
	paused, pauseEnd = true, time.Now().Add(pause)
	mu.Unlock()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	for i := burst / 3; i < burst; i++ {
		publish(i)
	}
	time.Sleep(time.Until(pauseEnd))
	down := cache.Stats()

	settled := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range burst {
			if i != poison && applied[pid(i)] == 0 {
				return false
			}
			// Every partition's generation was bumped (there was none
			// when its entry was filled). Read behind the cache's back,
			// so the entries stay as they are for the check below.
			if n, err := admin.Exists(ctx, "berth:test:{hotel:"+pid(i)+"}:gen").Result(); err != nil || n == 0 {
				return false
			}
		}
		if ordered {
			return true // nothing is acked, nothing pends on the server
		}
		n, err := natsbus.Pending(ctx, js, "combined-test")
		return err == nil && n == 0
	}
	for !settled() {
		select {
		case <-ctx.Done():
			t.Fatalf("never settled: applied %d of %d, cache %+v", len(applied), burst-1, cache.Stats())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if down.InvalidateErr == 0 {
		t.Fatalf("no invalidation failed while Redis was paused (stats %+v): the test did not test an outage", down)
	}
	mu.Lock()
	if len(inPause) == 0 {
		t.Errorf("the other job applied no event while Redis was paused: a cache outage held it up")
	}
	for i := range burst {
		if busy(i) && i != poison && tries[pid(i)] < 4 {
			t.Errorf("event %d: %d tries, want its 3 failures and a success", i, tries[pid(i)])
		}
	}
	mu.Unlock()
	for i := range burst {
		if body, hit := fetch(i, "after"); hit || string(body) != "after" {
			t.Errorf("partition %d: the entry filled before its event is still cached (%q): an invalidation was lost", i, body)
		}
	}
	m, err := dlq.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("the poison event was not dead-lettered: %v", err)
	}
	if want := events.DeadLetterSubject("combined-test", events.Subject("hotel", pid(poison), "reservation.held")); m.Subject != want {
		t.Fatalf("dead letter %s, want %s", m.Subject, want)
	}
	if extra, err := dlq.NextMsg(500 * time.Millisecond); err == nil {
		t.Fatalf("another dead letter: %s", extra.Subject)
	}
	t.Logf("while paused: %d failed invalidations, breaker %s, %d events applied by the other job", down.InvalidateErr, down.Breaker, len(inPause))
}
