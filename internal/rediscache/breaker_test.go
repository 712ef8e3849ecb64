package rediscache

import (
	"testing"
	"time"
)

func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	b := &breaker{threshold: 3, cooldown: time.Second, now: func() time.Time { return now }}
	for i := range 2 {
		if !b.allow() {
			t.Fatalf("closed breaker refused call %d", i)
		}
		b.failure()
	}
	if b.current() != Closed {
		t.Fatal("opened before the threshold")
	}
	b.success() // a success resets the count
	for range 3 {
		b.allow()
		b.failure()
	}
	if b.current() != Open {
		t.Fatalf("state %s after 3 consecutive failures", b.current())
	}
	if b.allow() {
		t.Fatal("open breaker let a call through before the cool-down")
	}
	now = now.Add(time.Second)
	if !b.allow() || b.current() != HalfOpen {
		t.Fatal("no probe after the cool-down")
	}
	if b.allow() {
		t.Fatal("a second concurrent probe was allowed")
	}
	b.failure()
	if b.current() != Open || b.allow() {
		t.Fatal("a failed probe did not re-open the breaker")
	}
	now = now.Add(time.Second)
	if !b.allow() {
		t.Fatal("no probe after the second cool-down")
	}
	b.release() // an abandoned probe frees the slot
	if !b.allow() {
		t.Fatal("released probe slot not reusable")
	}
	b.success()
	if b.current() != Closed || !b.allow() {
		t.Fatal("a good probe did not close the breaker")
	}
}
