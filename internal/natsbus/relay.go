package natsbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Outbox is what the relay needs from the database
// (postgres.Store implements it).
type Outbox interface {
	RelayOutbox(ctx context.Context, limit int,
		publish func(ctx context.Context, recs []events.Record) (acked []string, err error)) (int, error)
	PruneOutbox(ctx context.Context, keep time.Duration, limit int) (int, error)
}

// RelayConfig tunes a Relay; zero values take the defaults.
type RelayConfig struct {
	Region     string
	Batch      int           // events claimed per round (500)
	Poll       time.Duration // pause when the outbox is drained (50ms)
	Retention  time.Duration // sent rows are pruned after it (72h)
	PruneEvery time.Duration // pause between prune runs once caught up (1m)
	PruneBatch int           // sent rows deleted per statement (2,000)
	// PruneBudget bounds one prune run (1s): a run that has not caught up
	// by then goes on after Poll instead of after PruneEvery.
	PruneBudget time.Duration
	MaxBackoff  time.Duration // cap of the backoff when NATS or the DB fails (5s)
	AckTimeout  time.Duration // per batch wait for PubAcks (5s)
	Log         *slog.Logger
	// TracerProvider makes the producer spans of traced events (default
	// the global provider).
	TracerProvider trace.TracerProvider
	// MeterProvider gets the pruned-rows counter and the rounds' counters
	// (default the global provider).
	MeterProvider metric.MeterProvider
}

// Relay publishes the outbox of one region to JetStream.
type Relay struct {
	js     jetstream.JetStream
	out    Outbox
	cfg    RelayConfig
	tracer trace.Tracer
	pruned metric.Int64Counter
	// rounds and relayed count the claiming rounds (one claim statement
	// each, empty ones included) and the events they published: their
	// quotient is the events per round, what a round's statements are
	// shared by (docs/PERFORMANCE.md, "The events side per hold").
	rounds, relayed metric.Int64Counter
	// region is the attribute every count of the relay carries.
	region metric.MeasurementOption
}

// NewRelay returns a relay; call Run.
func NewRelay(js jetstream.JetStream, out Outbox, cfg RelayConfig) *Relay {
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 72 * time.Hour
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Minute
	}
	if cfg.PruneBatch <= 0 {
		cfg.PruneBatch = 2_000
	}
	if cfg.PruneBudget <= 0 {
		cfg.PruneBudget = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	r := &Relay{js: js, out: out, cfg: cfg, tracer: tracer(cfg.TracerProvider),
		region: metric.WithAttributes(attribute.String("region", cfg.Region))}
	r.pruned = counter(cfg, "berth.outbox.pruned", "{event}", "Sent outbox events deleted after the retention")
	r.rounds = counter(cfg, "berth.outbox.relay.rounds", "{round}", "Relay rounds (claiming transactions), empty ones included")
	r.relayed = counter(cfg, "berth.outbox.relay.events", "{event}", "Outbox events published and marked sent by the relay")
	return r
}

// counter is a counter of the relay's meter, or one that counts nothing
// when it cannot be built: a metric must not stop the relay.
func counter(cfg RelayConfig, name, unit, desc string) metric.Int64Counter {
	c, err := cfg.MeterProvider.Meter(tracerName).Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	if err != nil {
		cfg.Log.Warn("relay counter", "name", name, "err", err)
		return noop.Int64Counter{}
	}
	return c
}

// Run relays until ctx ends. A batch in flight when ctx ends is finished
// (published and marked, or rolled back) before Run returns.
func (r *Relay) Run(ctx context.Context) {
	log := r.cfg.Log.With("component", "outbox-relay", "relay_region", r.cfg.Region)
	bo := backoff{base: 50 * time.Millisecond, max: r.cfg.MaxBackoff}
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, setupTimeout)
		_, err := EnsureStream(sctx, r.js)
		cancel()
		if err == nil {
			break
		} else if ctx.Err() == nil {
			log.Warn("stream not ready; backing off", "err", err)
		}
		sleep(ctx, bo.next())
	}
	bo.reset()
	// Pruning runs beside the relay, not between its rounds: a relay kept
	// busy by full rounds never paused long enough to prune, and the sent
	// rows grew without bound (ADR 0016).
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.pruneLoop(ctx, log)
	}()
	defer wg.Wait()
	for ctx.Err() == nil {
		// The round runs on a context that ignores cancellation so that a
		// stop finishes the batch in flight instead of tearing it.
		round, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.AckTimeout+30*time.Second)
		n, err := r.out.RelayOutbox(round, r.cfg.Batch, r.publish)
		cancel()
		r.rounds.Add(ctx, 1, r.region)
		if n > 0 {
			r.relayed.Add(ctx, int64(n), r.region)
		}
		switch {
		case err != nil:
			d := bo.next()
			if ctx.Err() == nil {
				log.Warn("relay round failed; backing off", "err", err, "published", n, "backoff", d.String())
			}
			sleep(ctx, d)
			continue
		case n >= r.cfg.Batch:
			bo.reset()
			continue // more is waiting
		}
		bo.reset()
		sleep(ctx, r.cfg.Poll)
	}
}

// pruneLoop runs prune until ctx ends: every PruneEvery once caught up,
// after Poll while behind, after a backoff when the database fails.
func (r *Relay) pruneLoop(ctx context.Context, log *slog.Logger) {
	bo := backoff{base: r.cfg.Poll, max: r.cfg.MaxBackoff}
	for ctx.Err() == nil {
		caughtUp, err := r.Prune(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				log.Warn("prune outbox", "err", err)
			}
			sleep(ctx, bo.next())
		case caughtUp:
			bo.reset()
			sleep(ctx, r.cfg.PruneEvery)
		default:
			bo.reset()
			sleep(ctx, r.cfg.Poll)
		}
	}
}

// Prune runs one prune: it deletes the region's sent events older than
// the retention in statements of at most PruneBatch rows (each one short,
// so none holds its locks long) until a statement deletes fewer than that
// (caughtUp) or PruneBudget is spent.
func (r *Relay) Prune(ctx context.Context) (caughtUp bool, err error) {
	start := time.Now()
	total := 0
	defer func() {
		if total > 0 {
			r.pruned.Add(context.WithoutCancel(ctx), int64(total), r.region)
			r.cfg.Log.Info("pruned outbox", "component", "outbox-relay", "relay_region", r.cfg.Region,
				"count", total, "caught_up", caughtUp, "took", time.Since(start).String())
		}
	}()
	for ctx.Err() == nil {
		n, err := r.out.PruneOutbox(ctx, r.cfg.Retention, r.cfg.PruneBatch)
		total += n
		if err != nil {
			return false, err
		}
		if n < r.cfg.PruneBatch {
			return true, nil
		}
		if time.Since(start) >= r.cfg.PruneBudget {
			return false, nil
		}
	}
	return false, ctx.Err()
}

// publish sends a claimed batch asynchronously and waits for every PubAck.
// It returns the acknowledged ids that may be marked sent: for each
// partition, the events before its first failure, so a partition's later
// event is never marked while an earlier one still needs publishing.
//
// A traced event gets a producer span, child of the writing request's span,
// from its publish to its PubAck; the message carries that span's context.
func (r *Relay) publish(ctx context.Context, recs []events.Record) ([]string, error) {
	futures := make([]jetstream.PubAckFuture, len(recs))
	spans := make([]trace.Span, len(recs))
	end := func(i int, err error) {
		if spans[i] != nil {
			endSpan(spans[i], err)
			spans[i] = nil
		}
	}
	defer func() {
		for i := range spans {
			end(i, errors.New("batch abandoned"))
		}
	}()
	var firstErr error
	for i, rec := range recs {
		pctx, span := startPublish(ctx, r.tracer, rec, events.Subject(rec.Kind, rec.PartitionID, rec.Type))
		spans[i] = span
		msg, err := message(pctx, rec)
		if err != nil {
			// Unencodable is a bug upstream; keep it unsent and loud.
			firstErr = errors.Join(firstErr, err)
			end(i, err)
			continue
		}
		f, err := r.js.PublishMsgAsync(msg, jetstream.WithMsgID(rec.EventID), jetstream.WithExpectStream(StreamName))
		if err != nil {
			err = fmt.Errorf("publish %s: %w", rec.EventID, err)
			firstErr = errors.Join(firstErr, err)
			end(i, err)
			continue
		}
		futures[i] = f
	}
	timeout := time.NewTimer(r.cfg.AckTimeout)
	defer timeout.Stop()
	failed := map[string]bool{} // partitions with a failure so far
	acked := make([]string, 0, len(recs))
	for i, rec := range recs {
		ok := false
		if f := futures[i]; f != nil {
			select {
			case <-f.Ok():
				ok = true
				end(i, nil)
			case err := <-f.Err():
				err = fmt.Errorf("pub ack %s: %w", rec.EventID, err)
				firstErr = errors.Join(firstErr, err)
				end(i, err)
			case <-timeout.C:
				err := fmt.Errorf("pub ack %s: %w", rec.EventID, context.DeadlineExceeded)
				firstErr = errors.Join(firstErr, err)
				end(i, err)
				// Every remaining future shares the expired deadline.
				timeout.Reset(0)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if !ok {
			failed[rec.PartitionID] = true
			continue
		}
		if !failed[rec.PartitionID] {
			acked = append(acked, rec.EventID)
		}
	}
	return acked, firstErr
}

// message builds the NATS message of an outbox record: the CloudEvents
// envelope as the body, the event id as Nats-Msg-Id (broker dedup), a few
// headers so a consumer can route without decoding the body, and the trace
// context of ctx (traceparent, tracestate) when it carries a span.
func message(ctx context.Context, rec events.Record) (*nats.Msg, error) {
	body, err := json.Marshal(events.FromRecord(rec))
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", rec.EventID, err)
	}
	msg := nats.NewMsg(events.Subject(rec.Kind, rec.PartitionID, rec.Type))
	msg.Data = body
	msg.Header.Set("Content-Type", "application/cloudevents+json")
	msg.Header.Set("Ce-Id", rec.EventID)
	msg.Header.Set("Ce-Type", rec.Type)
	msg.Header.Set("Berth-Aggregate-Version", strconv.FormatInt(rec.AggregateVersion, 10))
	if rec.HomeRegion != "" {
		// The region whose relay sent it, where the partition was homed
		// then: a consumer there that finds the partition moved away
		// knows the new home may have skipped it (WaitlistHandlerIn).
		msg.Header.Set(RegionHeader, rec.HomeRegion)
	}
	injectHeaders(ctx, msg.Header)
	return msg, nil
}
