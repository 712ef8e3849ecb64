// Package natsbus is Berth's adapter to NATS JetStream: it creates the
// event stream and the consumers by code, relays the transactional outbox
// to the stream, and runs pull consumers with explicit acks, bounded
// redelivery and a dead-letter subject. What the consumers do with an event
// is theirs (the read model, notifications, refunds, cache invalidation);
// this package only moves events.
package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamName is the stream every event of every region lands in.
const StreamName = "BERTH_EVENTS"

// StreamSubjects is what the stream captures: the events and the dead letters.
var StreamSubjects = []string{"berth.>"}

// EventSubjects are the subjects of booking events (consumers filter on
// these, so dead letters never come back to them).
var EventSubjects = []string{"berth.hotel.>", "berth.clinic.>"}

// DuplicateWindow is how long the stream remembers a Nats-Msg-Id. A relay
// that died between publish and mark-sent republishes within seconds, far
// inside it; it is generous so a relay stuck in backoff still dedups.
const DuplicateWindow = 10 * time.Minute

// Connect dials NATS for a long-running service: it reconnects forever and
// tolerates a server that is down at start (the relay backs off meanwhile).
func Connect(url, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if log != nil && err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			if log != nil {
				log.Info("nats reconnected", "url", c.ConnectedUrl())
			}
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	return nc, nil
}

// NewJetStream returns a JetStream context whose async publishes give up
// after ackTimeout (the relay then retries the batch).
func NewJetStream(nc *nats.Conn, ackTimeout time.Duration) (jetstream.JetStream, error) {
	if ackTimeout <= 0 {
		ackTimeout = 5 * time.Second
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

// streamConfig is the event stream: file storage (the outbox, not the
// stream, stays the source of truth — a row is marked sent only after its
// PubAck) and the duplicate window the relay relies on.
var streamConfig = jetstream.StreamConfig{
	Name:        StreamName,
	Description: "Berth booking events (CloudEvents 1.0, JSON) and dead letters",
	Subjects:    StreamSubjects,
	Storage:     jetstream.FileStorage,
	Retention:   jetstream.LimitsPolicy,
	Duplicates:  DuplicateWindow,
	MaxAge:      14 * 24 * time.Hour,
	Discard:     jetstream.DiscardOld,
}

// EnsureStream creates the event stream, or updates it when its settings
// drifted. It does not update a stream that is already right: every relay
// and consumer calls it at start, and needless updates racing consumer
// creation are wasted work on the server.
func EnsureStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, streamConfig)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, StreamName) // created concurrently
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamName, err)
	}
	c := s.CachedInfo().Config
	if c.Duplicates != streamConfig.Duplicates || c.MaxAge != streamConfig.MaxAge || !slices.Equal(c.Subjects, streamConfig.Subjects) {
		if s, err = js.UpdateStream(ctx, streamConfig); err != nil {
			return nil, fmt.Errorf("update stream %s: %w", StreamName, err)
		}
	}
	return s, nil
}

// backoff is capped exponential backoff with full jitter.
type backoff struct {
	base, max time.Duration
	n         int
}

func (b *backoff) next() time.Duration {
	d := b.base << min(b.n, 20)
	if d <= 0 || d > b.max {
		d = b.max
	}
	b.n++
	return time.Duration(rand.Int64N(int64(d))) + b.base/2
}

func (b *backoff) reset() { b.n = 0 }

// sleep waits d or until ctx ends; it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
