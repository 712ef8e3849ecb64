package natsbus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
)

// Message is one delivery handed to a Handler.
type Message struct {
	Subject   string
	Data      []byte
	Delivered uint64 // 1 on the first delivery
	// Event is the decoded envelope; DecodeErr is set instead when the body
	// is not a valid event (a poison message).
	Event     events.Envelope
	DecodeErr error
	// Region is the region whose relay published the message (its
	// partition's home then; "" for messages published before the header
	// existed); Redriven marks a copy a consumer published again
	// (Redrive).
	Region   string
	Redriven bool
}

// RegionHeader and RedrivenHeader are the message headers behind
// Message.Region and Message.Redriven.
const (
	RegionHeader   = "Berth-Region"
	RedrivenHeader = "Berth-Redriven"
)

// setupTimeout bounds one attempt to set a consumer up (the stream, the
// consumer, its first pull). The JetStream client waits for an API reply
// until its context ends, and falls back to its own timeout only when the
// context has no deadline: a reply lost to a server restart held a caller
// with a long deadline for all of it, and its consumer never started. After
// the bound the attempt fails and the loop tries again.
const setupTimeout = 10 * time.Second

// Handler applies one event. It must be idempotent: delivery is at least
// once. An error makes the message come back later, up to the limit.
type Handler func(ctx context.Context, m Message) error

// ConsumerConfig describes a durable pull consumer.
type ConsumerConfig struct {
	Durable string
	Filters []string // default EventSubjects
	// MaxDeliver bounds the deliveries of one message (5): after the last
	// failure the message is published to the dead-letter subject and acked.
	MaxDeliver int
	AckWait    time.Duration // (30s)
	// HandleTimeout bounds one run of the handler (default AckWait: after
	// it the broker redelivers anyway). It also bounds how long a stop waits
	// for the messages in flight.
	HandleTimeout time.Duration
	Workers       int // messages handled concurrently (8)
	// MaxAckPending bounds the messages delivered and not yet acked (1000):
	// past it the server delivers nothing new until some are acked.
	MaxAckPending int
	// DeliverNew starts a newly created consumer at the end of the stream
	// instead of its beginning (cache invalidation has no use for history).
	DeliverNew bool
	// SubjectOnly is for a handler that needs only the subject (kind,
	// partition, event type) and the headers: the body is not decoded, and
	// Message.Event is left zero with DecodeErr nil. Decoding every event's
	// JSON cost such a consumer (cache invalidation) as much as its own work
	// (docs/PERFORMANCE.md, "CPU per hold").
	SubjectOnly bool
	// StartTime, when set, starts a newly created consumer at the first
	// event published at or after it (and overrides DeliverNew): a consumer
	// per process instance that must not miss what happened while its
	// process was down, within a bound (the combined search and cache
	// consumer replays one cache TTL: ForIndexAndCache).
	StartTime time.Time
	// InactiveThreshold, when set, lets the server delete the consumer
	// after it has had no client for that long (a consumer per process
	// instance, which would otherwise outlive it).
	InactiveThreshold time.Duration
	// Retry is the delay before redelivery n (n ≥ 1) after a failure
	// (default capped exponential from 200ms to 10s).
	Retry func(n uint64) time.Duration
	Log   *slog.Logger
	// TracerProvider makes the consumer spans of traced messages (default
	// the global provider).
	TracerProvider trace.TracerProvider
	// Transient tells a failure of the consumer's own dependencies (its
	// database down, a timeout) from a failure of the message. A transient
	// failure is retried for as long as it lasts and never counts toward
	// dead-lettering: an outage must not turn good events into dead
	// letters. Default: context deadlines and network errors only.
	Transient func(error) bool
	// Ordered makes the consumer nats.go's ordered consumer instead of a
	// durable one: created by this process and for it alone (named after
	// Durable), in the server's memory, with no acks. The client sees every
	// message once, in stream order, and recreates the consumer from the
	// last message it received when it misses one (a sequence gap, a missed
	// heartbeat, a server restart), so nothing is lost while the process
	// lives. As the server never redelivers, the retries are this process's:
	// a failed message comes back to a worker after Retry's delay, a
	// dependency failure for as long as it lasts, any other up to
	// MaxDeliver times before it is dead-lettered; at most MaxAckPending
	// messages are in hand (being handled or waiting for a retry) before
	// the next is taken. What a process has in hand when it stops is not
	// redelivered to anybody: only for a consumer whose process replays
	// what it needs when it starts again (StartTime), such as the search
	// index and cache consumer of every booking service (docs/adr/0024).
	// Per event it saves the ack (a message to the server and the server's
	// bookkeeping of it) and the consumer's state on disk.
	Ordered bool
}

// transient is the default Transient: deadlines and network errors.
func transient(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne)
}

// Consume runs a durable pull consumer until ctx ends; messages in flight
// are finished (handled and acked) before it returns. It survives NATS
// restarts: failures to create the consumer or fetch back off and retry.
func Consume(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig, h Handler) error {
	if cfg.Durable == "" {
		return errors.New("consume: a durable name is required")
	}
	if len(cfg.Filters) == 0 {
		cfg.Filters = EventSubjects
	}
	if cfg.MaxDeliver <= 0 {
		cfg.MaxDeliver = 5
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.HandleTimeout <= 0 {
		cfg.HandleTimeout = cfg.AckWait
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Retry == nil {
		cfg.Retry = func(n uint64) time.Duration {
			return min(200*time.Millisecond<<min(n-1, 10), 10*time.Second)
		}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Ordered {
		return consumeOrdered(ctx, js, cfg)(h)
	}
	log := cfg.Log.With("consumer", cfg.Durable)
	tr := tracer(cfg.TracerProvider)
	fails := &failureCounts{max: maxFailureCounts}
	work := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	// A message in flight is finished even when ctx ends (its effect and
	// its ack belong together), but never for longer than HandleTimeout: a
	// stuck handler cannot hold up a stop.
	base := context.WithoutCancel(ctx)
	for range cfg.Workers {
		wg.Go(func() {
			for msg := range work {
				hctx, cancel := context.WithTimeout(base, cfg.HandleTimeout)
				handle(hctx, js, cfg, log, tr, h, msg, fails)
				cancel()
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	bo := backoff{base: 100 * time.Millisecond, max: 5 * time.Second}
	var (
		cons jetstream.Consumer
		it   jetstream.MessagesContext
	)
	// stop ends the iterator and hands back what it had prefetched but not
	// yet given to a worker: a Nak makes the server redeliver those at once
	// (to this consumer's next incarnation or another instance) instead of
	// after AckWait.
	stop := func() {
		if it == nil {
			return
		}
		it.Drain()
		for {
			msg, err := it.Next(jetstream.NextMaxWait(time.Second))
			if err != nil {
				break
			}
			_ = msg.Nak()
		}
		it = nil
	}
	defer stop()
	for ctx.Err() == nil {
		if cons == nil {
			var err error
			sctx, cancel := context.WithTimeout(ctx, setupTimeout)
			cons, err = EnsureConsumer(sctx, js, cfg)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("consumer not ready; backing off", "err", err)
				}
				sleep(ctx, bo.next())
				continue
			}
		}
		if it == nil {
			// One long-lived pull that the client tops up as the buffer
			// drains, rather than a pull request (and a fresh inbox
			// subscription) per fetch: with a fetch per message or two, the
			// pulls cost the broker and the process more CPU than the
			// events themselves (docs/PERFORMANCE.md, "CPU per hold").
			var err error
			if it, err = cons.Messages(jetstream.PullMaxMessages(cfg.Workers * 4)); err != nil {
				if ctx.Err() == nil {
					log.Warn("pull failed; backing off", "err", err)
				}
				cons, it = nil, nil
				sleep(ctx, bo.next())
				continue
			}
		}
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			log.Warn("fetch failed; backing off", "err", err)
			stop()
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
				errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBadRequest) {
				cons = nil
			}
			sleep(ctx, bo.next())
			continue
		}
		bo.reset()
		work <- msg
	}
	return nil
}

// EnsureConsumer creates or updates a durable pull consumer (and the
// stream, so consumers may start before any relay).
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig) (jetstream.Consumer, error) {
	if _, err := EnsureStream(ctx, js); err != nil {
		return nil, err
	}
	filters := cfg.Filters
	if len(filters) == 0 {
		filters = EventSubjects
	}
	maxDeliver := cfg.MaxDeliver
	if maxDeliver <= 0 {
		maxDeliver = 5
	}
	cc := jetstream.ConsumerConfig{
		Durable:        cfg.Durable,
		FilterSubjects: filters,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        cfg.AckWait,
		// The handler dead-letters a message that failed MaxDeliver times
		// on its own account; the server never gives up on a message, so
		// one that fails only because a dependency is down (transient), or
		// whose dead-lettering failed, keeps coming back until it is
		// handled.
		MaxDeliver:        -1,
		MaxAckPending:     cmp.Or(cfg.MaxAckPending, 1000),
		InactiveThreshold: cfg.InactiveThreshold,
	}
	switch {
	case !cfg.StartTime.IsZero():
		start := cfg.StartTime.UTC()
		cc.DeliverPolicy, cc.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	case cfg.DeliverNew:
		cc.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	if info, err := js.Consumer(ctx, StreamName, cfg.Durable); err == nil {
		// DeliverPolicy cannot change on an existing consumer.
		cc.DeliverPolicy = info.CachedInfo().Config.DeliverPolicy
		cc.OptStartSeq = info.CachedInfo().Config.OptStartSeq
		cc.OptStartTime = info.CachedInfo().Config.OptStartTime
	}
	c, err := js.CreateOrUpdateConsumer(ctx, StreamName, cc)
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", cfg.Durable, err)
	}
	return c, nil
}

// handle runs h on one delivery, under a consumer span continuing the trace
// in the message's headers, and acks, retries or dead-letters it.
func handle(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig, log *slog.Logger, tr trace.Tracer,
	h Handler, msg jetstream.Msg, fails *failureCounts) {
	m, seq := delivered(cfg, msg)
	ctx, err := run(ctx, cfg, tr, h, msg, m)
	if err == nil {
		fails.forget(seq)
		if err := msg.Ack(); err != nil {
			// The effect is recorded; a redelivery will be a no-op.
			log.Warn("ack failed", "subject", m.Subject, "err", err)
		}
		return
	}
	isTransient := cfg.Transient
	if isTransient == nil {
		isTransient = transient
	}
	if errors.Is(err, berth.ErrDependency) || isTransient(err) {
		log.WarnContext(ctx, "dependency failure; will retry", "subject", m.Subject, "delivered", m.Delivered, "err", err)
		_ = msg.NakWithDelay(cfg.Retry(m.Delivered))
		return
	}
	if failures := fails.inc(seq); failures < uint64(cfg.MaxDeliver) {
		log.WarnContext(ctx, "handler failed; will retry", "subject", m.Subject, "delivered", m.Delivered, "err", err)
		_ = msg.NakWithDelay(cfg.Retry(m.Delivered))
		return
	}
	if dlqErr := deadLetter(ctx, js, cfg.Durable, msg, m, err); dlqErr != nil {
		log.ErrorContext(ctx, "dead-lettering failed; will retry", "subject", m.Subject, "err", dlqErr)
		_ = msg.NakWithDelay(cfg.Retry(m.Delivered))
		return
	}
	log.ErrorContext(ctx, "message dead-lettered", "subject", m.Subject, "delivered", m.Delivered, "err", err)
	fails.forget(seq)
	_ = msg.Ack()
}

// delivered is the Message of a delivery (its body decoded unless
// SubjectOnly) and its stream sequence.
func delivered(cfg ConsumerConfig, msg jetstream.Msg) (Message, uint64) {
	m := Message{Subject: msg.Subject(), Data: msg.Data(), Delivered: 1}
	if h := msg.Headers(); h != nil {
		m.Region, m.Redriven = h.Get(RegionHeader), h.Get(RedrivenHeader) != ""
	}
	var seq uint64
	if md, err := msg.Metadata(); err == nil {
		m.Delivered = md.NumDelivered
		seq = md.Sequence.Stream
	}
	if !cfg.SubjectOnly {
		m.Event, m.DecodeErr = events.Decode(m.Data)
	}
	return m, seq
}

// run runs h on m under a consumer span continuing the trace in the
// message's headers; a panic is the handler's failure. It returns the
// span's context (for the logs) and h's error.
func run(ctx context.Context, cfg ConsumerConfig, tr trace.Tracer, h Handler, msg jetstream.Msg, m Message) (context.Context, error) {
	ctx, span := startConsume(ctx, tr, cfg.Durable, msg.Headers(), m)
	err := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("handler panic: %v", v)
			}
		}()
		return h(ctx, m)
	}()
	endSpan(span, err)
	return ctx, err
}

// failureCounts counts, per stream sequence, the deliveries of a message
// that failed on its own account (not transiently), so that an outage of a
// dependency never brings a good message closer to the dead-letter subject.
// Counts live in this process: a restart gives a message its full budget
// again, which errs on the side of retrying. So does the bound: a count is
// dropped when its message is handled or dead-lettered, but a message that
// another process finished, or that left the stream, would leave its count
// behind for ever; past max counts the oldest message (lowest sequence)
// loses its count.
type failureCounts struct {
	mu  sync.Mutex
	max int
	n   map[uint64]uint64
}

// maxFailureCounts bounds the messages counted at once: far more than fail
// together in practice, a few hundred kilobytes at most.
const maxFailureCounts = 10_000

func (f *failureCounts) inc(seq uint64) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[uint64]uint64{}
	}
	if _, known := f.n[seq]; !known && f.max > 0 && len(f.n) >= f.max {
		first, oldest := true, uint64(0)
		for s := range f.n {
			if first || s < oldest {
				first, oldest = false, s
			}
		}
		delete(f.n, oldest)
	}
	f.n[seq]++
	return f.n[seq]
}

func (f *failureCounts) forget(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.n, seq)
}

// deadLetter publishes a copy of msg to berth.dlq.<consumer>.… with the
// reason; the dedup id makes a repeated dead-lettering harmless.
func deadLetter(ctx context.Context, js jetstream.JetStream, consumer string, msg jetstream.Msg, m Message, cause error) error {
	dl := nats.NewMsg(events.DeadLetterSubject(consumer, m.Subject))
	dl.Data = m.Data
	dl.Header.Set("Berth-Dlq-Consumer", consumer)
	dl.Header.Set("Berth-Dlq-Subject", m.Subject)
	dl.Header.Set("Berth-Dlq-Reason", cause.Error())
	dl.Header.Set("Berth-Dlq-Deliveries", strconv.FormatUint(m.Delivered, 10))
	injectHeaders(ctx, dl.Header) // a replay of the dead letter continues the trace
	id := consumer + ":" + m.Subject
	if md, err := msg.Metadata(); err == nil {
		id = consumer + ":" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(pctx, dl, jetstream.WithMsgID("dlq:"+id)); err != nil {
		return fmt.Errorf("publish dead letter: %w", err)
	}
	return nil
}

// Pending reports how many messages a consumer has not yet acked
// (waiting plus in flight).
func Pending(ctx context.Context, js jetstream.JetStream, durable string) (uint64, error) {
	c, err := js.Consumer(ctx, StreamName, durable)
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", durable, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", durable, err)
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}
