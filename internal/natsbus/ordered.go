package natsbus

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/nats-io/nats.go/jetstream"
)

// inHand is a message of an ordered consumer from its delivery until it is
// handled or dead-lettered: the server does not redeliver it, so its
// attempts and failures are counted here.
type inHand struct {
	msg      jetstream.Msg
	m        Message
	attempts uint64
	failures uint64 // attempts that failed on the message's own account
}

// consumeOrdered is Consume for ConsumerConfig.Ordered. It returns the
// function that runs it, so that Consume's defaults are applied once.
func consumeOrdered(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig) func(Handler) error {
	return func(h Handler) error {
		log := cfg.Log.With("consumer", cfg.Durable)
		tr := tracer(cfg.TracerProvider)
		isTransient := cfg.Transient
		if isTransient == nil {
			isTransient = transient
		}
		maxInHand := cmp.Or(cfg.MaxAckPending, 1000)
		// A message takes a slot when it is taken from the server and gives
		// it back when it is done with: at most maxInHand are being handled
		// or waiting for a retry, as the server bounds a durable consumer's
		// unacked messages.
		slots := make(chan struct{}, maxInHand)
		work := make(chan *inHand)
		// Messages whose retry delay is over; a slot is held for each, so a
		// send never blocks.
		again := make(chan *inHand, maxInHand)
		stopped := make(chan struct{})
		// As Consume: a message in hand is finished even when ctx ends,
		// within HandleTimeout; its retries are not (the process is
		// stopping, and what it had in hand is replayed where it starts
		// again).
		base := context.WithoutCancel(ctx)
		attempt := func(d *inHand) (retryIn time.Duration) {
			d.attempts++
			d.m.Delivered = d.attempts
			hctx, cancel := context.WithTimeout(base, cfg.HandleTimeout)
			defer cancel() // after the dead-lettering, which runs in it
			lctx, err := run(hctx, cfg, tr, h, d.msg, d.m)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, berth.ErrDependency) || isTransient(err):
				log.WarnContext(lctx, "dependency failure; will retry", "subject", d.m.Subject, "delivered", d.attempts, "err", err)
				return cfg.Retry(d.attempts)
			}
			if d.failures++; d.failures < uint64(cfg.MaxDeliver) {
				log.WarnContext(lctx, "handler failed; will retry", "subject", d.m.Subject, "delivered", d.attempts, "err", err)
				return cfg.Retry(d.attempts)
			}
			if dlqErr := deadLetter(lctx, js, cfg.Durable, d.msg, d.m, err); dlqErr != nil {
				log.ErrorContext(lctx, "dead-lettering failed; will retry", "subject", d.m.Subject, "err", dlqErr)
				return cfg.Retry(d.attempts)
			}
			log.ErrorContext(lctx, "message dead-lettered", "subject", d.m.Subject, "delivered", d.attempts, "err", err)
			return 0
		}
		var wg sync.WaitGroup
		for range cfg.Workers {
			wg.Go(func() {
				for {
					select {
					case <-stopped:
						return // retries left in hand are dropped: see base
					default:
					}
					var d *inHand
					select {
					case d = <-again:
					case next, ok := <-work:
						if !ok {
							return
						}
						d = next
					}
					if wait := attempt(d); wait > 0 {
						time.AfterFunc(wait, func() {
							select {
							case again <- d:
							case <-stopped:
							}
						})
						continue
					}
					<-slots
				}
			})
		}
		defer func() {
			close(stopped)
			close(work)
			wg.Wait()
		}()
		bo := backoff{base: 100 * time.Millisecond, max: 5 * time.Second}
		var (
			it      jetstream.MessagesContext
			lastSeq uint64 // the stream sequence of the last message taken
		)
		defer func() {
			if it != nil {
				it.Stop()
			}
		}()
		for ctx.Err() == nil {
			if it == nil {
				var err error
				if it, err = orderedMessages(ctx, js, cfg, lastSeq); err != nil {
					if ctx.Err() == nil {
						log.Warn("consumer not ready; backing off", "err", err)
					}
					it = nil
					sleep(ctx, bo.next())
					continue
				}
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				continue
			}
			msg, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				<-slots
				if ctx.Err() != nil {
					break
				}
				// The ordered consumer recovers from gaps and restarts by
				// itself; what it returns is worse: start it again after
				// the last message taken.
				log.Warn("fetch failed; backing off", "err", err)
				it.Stop()
				it = nil
				sleep(ctx, bo.next())
				continue
			}
			bo.reset()
			d := &inHand{msg: msg}
			d.m, lastSeq = delivered(cfg, msg)
			work <- d
		}
		return nil
	}
}

// orderedMessages creates the ordered consumer of cfg and its message
// iterator: at cfg's start (StartTime, DeliverNew or the beginning) the
// first time, after lastSeq when it is started again.
func orderedMessages(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig, lastSeq uint64) (jetstream.MessagesContext, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if _, err := EnsureStream(ctx, js); err != nil {
		return nil, err
	}
	oc := jetstream.OrderedConsumerConfig{
		FilterSubjects:    cfg.Filters,
		InactiveThreshold: cfg.InactiveThreshold,
		NamePrefix:        cfg.Durable,
	}
	switch {
	case lastSeq > 0:
		oc.DeliverPolicy, oc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, lastSeq+1
	case !cfg.StartTime.IsZero():
		start := cfg.StartTime.UTC()
		oc.DeliverPolicy, oc.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	case cfg.DeliverNew:
		oc.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	c, err := js.OrderedConsumer(ctx, StreamName, oc)
	if err != nil {
		return nil, err
	}
	return c.Messages(jetstream.PullMaxMessages(cfg.Workers * 4))
}
