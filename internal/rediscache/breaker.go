package rediscache

import (
	"sync"
	"time"
)

// State is the state of the circuit breaker in front of Redis.
type State int32

// The breaker states. Closed: every call goes to Redis. Open: no call goes to
// Redis until the cool-down has passed. HalfOpen: one probe call is let
// through; its outcome closes or re-opens the breaker.
const (
	Closed State = iota
	Open
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "closed"
}

// breaker opens after threshold consecutive failures so that, while Redis
// is down or slow, reads go straight to the database without paying the
// Redis timeout each time; after cooldown a single probe decides.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu       sync.Mutex
	state    State
	failures int
	openedAt time.Time
	probing  bool
	onChange func(from, to State)
}

// allow reports whether a call may go to Redis now. In half-open state only
// one call (the probe) is allowed at a time.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return true
	case Open:
		if b.now().Sub(b.openedAt) < b.cooldown {
			return false
		}
		b.set(HalfOpen)
		b.probing = true
		return true
	default: // HalfOpen
		if b.probing {
			return false
		}
		b.probing = true
		return true
	}
}

// success records a call that Redis answered (a nil reply is an answer).
func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures = 0
	b.probing = false
	if b.state != Closed {
		b.set(Closed)
	}
}

// failure records an error or a timeout.
func (b *breaker) failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	b.failures++
	if b.state == HalfOpen || (b.state == Closed && b.failures >= b.threshold) {
		b.openedAt = b.now()
		b.set(Open)
	}
}

// release gives back a probe slot that was never used (the call was
// abandoned by its caller, so it says nothing about Redis).
func (b *breaker) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

func (b *breaker) current() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// set changes the state; b.mu is held.
func (b *breaker) set(to State) {
	from := b.state
	b.state = to
	if b.onChange != nil && from != to {
		b.onChange(from, to)
	}
}
