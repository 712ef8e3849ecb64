package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Berth's named instruments. The Prometheus exporter derives the series
// names: dots become underscores, counters get _total, a unit of "s" gets
// _seconds; braces units such as {event} add nothing. Every series carries
// region.
const (
	// berth_booking_outcomes_total{op,code,region}
	metricOutcomes = "berth.booking.outcomes"
	// berth_tx_retries_total{reason,region}
	metricTxRetries = "berth.tx.retries"
	// berth_db_pool_{acquired,idle,total,max}_conns{region}, berth_db_pool_{empty_acquire,acquires}_total{region},
	// berth_db_pool_acquire_wait_seconds_total{region}
	metricPoolPrefix = "berth.db.pool."
	// berth_outbox_backlog{region}, berth_outbox_oldest_age_seconds{region}
	metricOutboxBacklog = "berth.outbox.backlog"
	metricOutboxAge     = "berth.outbox.oldest_age"
	// berth_consumer_lag{consumer,region}
	metricConsumerLag = "berth.consumer.lag"
	// berth_cache_requests_total{cache,result,region}; the hit ratio is
	// sum(rate(…{result="hit"}[5m])) / sum(rate(…[5m])).
	metricCacheRequests = "berth.cache.requests"
	// berth_waiting_room_depth{room,region}
	metricWaitingRoomDepth = "berth.waiting_room.depth"
	// berth_search_lag_seconds{region} (histogram): event time → applied
	// to the search index; berth_search_hotels{region}, berth_search_ready{region}
	metricSearchLag    = "berth.search.lag"
	metricSearchHotels = "berth.search.hotels"
	metricSearchReady  = "berth.search.ready"
)

const regionKey = attribute.Key("region")

// instruments are the synchronous instruments other code records into.
type instruments struct {
	outcomes     metric.Int64Counter
	retries      metric.Int64Counter
	consumerLag  metric.Int64Gauge
	cache        metric.Int64Counter
	waitingDepth metric.Int64Gauge
	searchLag    metric.Float64Histogram
}

func (in *instruments) init(m metric.Meter) error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	in.outcomes, err = m.Int64Counter(metricOutcomes, metric.WithUnit("{request}"),
		metric.WithDescription("Booking write requests by operation and outcome code (ok, sold_out, slot_taken, …)."))
	add(err)
	in.retries, err = m.Int64Counter(metricTxRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Write transactions retried after a serialization failure or deadlock, by SQLSTATE."))
	add(err)
	in.consumerLag, err = m.Int64Gauge(metricConsumerLag, metric.WithUnit("{message}"),
		metric.WithDescription("Messages a stream consumer has yet to process."))
	add(err)
	in.cache, err = m.Int64Counter(metricCacheRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Cache lookups by result (hit, miss, error)."))
	add(err)
	in.waitingDepth, err = m.Int64Gauge(metricWaitingRoomDepth, metric.WithUnit("{visitor}"),
		metric.WithDescription("Visitors waiting in a waiting room."))
	add(err)
	in.searchLag, err = m.Float64Histogram(metricSearchLag, metric.WithUnit("s"),
		metric.WithDescription("Time from a catalog or inventory event's commit to its application to the search index."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry instruments: %w", err)
	}
	return nil
}

func (t *Telemetry) attrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(kv, t.regionAttrs()...)...)
}

// regionAttrs is the region label, or none for a service of every region
// (the read model).
func (t *Telemetry) regionAttrs() []attribute.KeyValue {
	if t.region == "" {
		return nil
	}
	return []attribute.KeyValue{regionKey.String(t.region)}
}

// BookingOutcome counts one booking write: op names the operation
// (hotel.hold, clinic.confirm, …), code is "ok" or the problem code.
// Every booking write counts one, so each series' attributes are built once
// (ops and codes are few: the routes' operations and the API's codes).
func (t *Telemetry) BookingOutcome(ctx context.Context, op, code string) {
	k := outcomeKey{op, code}
	t.outcomeSets.RLock()
	o, ok := t.outcomeSets.m[k]
	t.outcomeSets.RUnlock()
	if !ok {
		o = metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{attribute.String("op", op),
			attribute.String("code", code)}, t.regionAttrs()...)...))
		t.outcomeSets.Lock()
		if t.outcomeSets.m == nil {
			t.outcomeSets.m = map[outcomeKey]metric.MeasurementOption{}
		}
		t.outcomeSets.m[k] = o
		t.outcomeSets.Unlock()
	}
	t.inst.outcomes.Add(ctx, 1, o)
}

type outcomeKey struct{ op, code string }

// TxRetry counts one retried transaction attempt; err is what caused it
// (its SQLSTATE becomes the reason label).
func (t *Telemetry) TxRetry(ctx context.Context, err error) {
	t.inst.retries.Add(ctx, 1, t.attrs(attribute.String("reason", sqlState(err))))
}

// sqlState returns the SQLSTATE of a database error, or "other".
func sqlState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) && s.SQLState() != "" {
		return s.SQLState()
	}
	return "other"
}

// ConsumerLag records how many messages consumer has yet to process (for a
// JetStream consumer, ConsumerInfo.NumPending).
func (t *Telemetry) ConsumerLag(ctx context.Context, consumer string, pending int64) {
	t.inst.consumerLag.Record(ctx, pending, t.attrs(attribute.String("consumer", consumer)))
}

// CacheResult counts one lookup in cache; result is "hit", "miss" or
// "error" (an outage that fell back to the database).
func (t *Telemetry) CacheResult(ctx context.Context, cache, result string) {
	t.inst.cache.Add(ctx, 1, t.attrs(attribute.String("cache", cache), attribute.String("result", result)))
}

// WaitingRoomDepth records how many visitors wait in room (keep room
// low-cardinality: one per opening, not per visitor).
func (t *Telemetry) WaitingRoomDepth(ctx context.Context, room string, depth int64) {
	t.inst.waitingDepth.Record(ctx, depth, t.attrs(attribute.String("room", room)))
}

// SearchLag records the time from an event's commit to its application to
// the search index.
func (t *Telemetry) SearchLag(ctx context.Context, d time.Duration) {
	t.inst.searchLag.Record(ctx, max(d, 0).Seconds(), t.regionOnly)
}

// ObserveSearch reports, on every scrape, how many hotels the search index
// holds and whether it answers (1) or is still being built (0).
func (t *Telemetry) ObserveSearch(stat func() (hotels int64, ready bool)) error {
	hotels, err1 := t.meter.Int64ObservableGauge(metricSearchHotels, metric.WithUnit("{hotel}"),
		metric.WithDescription("Hotels in the search index."))
	ready, err2 := t.meter.Int64ObservableGauge(metricSearchReady, metric.WithUnit("{state}"),
		metric.WithDescription("1 when the search index answers, 0 while it is first built."))
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("search instruments: %w", err)
	}
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n, ok := stat()
		r := int64(0)
		if ok {
			r = 1
		}
		o.ObserveInt64(hotels, n, t.attrs())
		o.ObserveInt64(ready, r, t.attrs())
		return nil
	}, hotels, ready)
	return err
}

// PoolStats is a snapshot of a connection pool (postgres.DB.PoolStats).
type PoolStats struct {
	Acquired, Idle, Total, Max int32
	// EmptyAcquire counts acquires that had to wait for a connection: the
	// pool was saturated.
	EmptyAcquire int64
	// Acquires counts the acquires; AcquireWait is their summed wait.
	Acquires    int64
	AcquireWait time.Duration
}

// ObservePool reports the pool's saturation on every scrape.
func (t *Telemetry) ObservePool(stat func() PoolStats) error {
	m := t.meter
	acquired, err1 := m.Int64ObservableGauge(metricPoolPrefix+"acquired_conns", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections in use."))
	idle, err2 := m.Int64ObservableGauge(metricPoolPrefix+"idle_conns", metric.WithUnit("{connection}"),
		metric.WithDescription("Idle connections."))
	total, err3 := m.Int64ObservableGauge(metricPoolPrefix+"total_conns", metric.WithUnit("{connection}"),
		metric.WithDescription("Open connections."))
	maxConns, err4 := m.Int64ObservableGauge(metricPoolPrefix+"max_conns", metric.WithUnit("{connection}"),
		metric.WithDescription("Pool size limit."))
	empty, err5 := m.Int64ObservableCounter(metricPoolPrefix+"empty_acquire", metric.WithUnit("{acquire}"),
		metric.WithDescription("Acquires that waited because the pool had no idle connection."))
	acquires, err6 := m.Int64ObservableCounter(metricPoolPrefix+"acquires", metric.WithUnit("{acquire}"),
		metric.WithDescription("Connections taken from the pool."))
	wait, err7 := m.Float64ObservableCounter(metricPoolPrefix+"acquire_wait", metric.WithUnit("s"),
		metric.WithDescription("Time spent taking connections from the pool, summed over the acquires."))
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
		return fmt.Errorf("pool instruments: %w", err)
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stat()
		a := t.attrs()
		o.ObserveInt64(acquired, int64(s.Acquired), a)
		o.ObserveInt64(idle, int64(s.Idle), a)
		o.ObserveInt64(total, int64(s.Total), a)
		o.ObserveInt64(maxConns, int64(s.Max), a)
		o.ObserveInt64(empty, s.EmptyAcquire, a)
		o.ObserveInt64(acquires, s.Acquires, a)
		o.ObserveFloat64(wait, s.AcquireWait.Seconds(), a)
		return nil
	}, acquired, idle, total, maxConns, empty, acquires, wait)
	return err
}

// OutboxStats is the unsent part of a region's outbox.
type OutboxStats struct {
	Backlog int64
	// OldestAge is how long the oldest unsent event has waited (0 when none).
	OldestAge time.Duration
}

// ObserveOutbox reports the outbox backlog and the age of its oldest unsent
// event. query runs at most once per ttl (at least 5s), however often
// Prometheus scrapes; a failed query leaves the previous values.
func (t *Telemetry) ObserveOutbox(ttl time.Duration, query func(context.Context) (OutboxStats, error)) error {
	ttl = max(ttl, 5*time.Second)
	m := t.meter
	backlog, err1 := m.Int64ObservableGauge(metricOutboxBacklog, metric.WithUnit("{event}"),
		metric.WithDescription("Outbox events of this region not yet published."))
	age, err2 := m.Float64ObservableGauge(metricOutboxAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest unpublished outbox event of this region."))
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("outbox instruments: %w", err)
	}
	var (
		mu      sync.Mutex
		last    OutboxStats
		fetched time.Time
		ok      bool
	)
	_, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(fetched) >= ttl {
			fetched = time.Now() // a failing query is retried after ttl, not on every scrape
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			s, err := query(qctx)
			cancel()
			if err == nil {
				last, ok = s, true
			}
		}
		if !ok {
			return nil // never measured: no series rather than a false zero
		}
		a := t.attrs()
		o.ObserveInt64(backlog, last.Backlog, a)
		o.ObserveFloat64(age, last.OldestAge.Seconds(), a)
		return nil
	}, backlog, age)
	return err
}

// HoldBatchStats is what hot-partition batching did since the service
// started (postgres.BatchStats).
type HoldBatchStats struct {
	Batches, Batched, Alone, Reruns, Groups, Grouped int64
	// The committed batches' time by phase (postgres.BatchStats).
	Lock, Decide, Commit time.Duration
	// The key reads of holds the sold-out cache refused: statements, keys.
	KeyReads, KeysRead int64
}

// ObserveHoldBatches reports hot-partition batching on every scrape: batch
// transactions committed, holds decided in them, and holds of a batch that
// ran alone (docs/adr/0010-hold-batching.md), and batches run again
// checked in Go after a guard of their committing round trip fired
// (docs/adr/0030-batch-in-two-round-trips.md), and hold groups
// (docs/adr/0033-hold-groups.md). Holds per batch is
// rate(berth_hold_batched_total) / rate(berth_hold_batches_total), per
// group rate(berth_hold_grouped_total) / rate(berth_hold_groups_total).
// berth_hold_batch_phase_seconds_total{phase=lock|decide|commit} sums the
// committed batches' time by phase; divided by the batches' rate, a hot
// room type's cycle (docs/adr/0010-hold-batching.md, "2026-12-06").
// berth_hold_refusal_key_reads_total and berth_hold_refusal_keys_read_total
// count the sold-out cache's refusals' key reads and the keys they read
// (docs/adr/0008-sold-out-cache.md): keys per statement is how well a
// flash sale's losers share them.
func (t *Telemetry) ObserveHoldBatches(stat func() HoldBatchStats) error {
	batches, err1 := t.meter.Int64ObservableCounter("berth.hold.batches", metric.WithUnit("{transaction}"),
		metric.WithDescription("Hold batch transactions committed (holds of one room type decided together)."))
	batched, err2 := t.meter.Int64ObservableCounter("berth.hold.batched", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds decided in a batch transaction."))
	alone, err3 := t.meter.Int64ObservableCounter("berth.hold.batch_alone", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds of a batch that ran in a transaction of their own (a limit, a replay, a night not here)."))
	reruns, err4 := t.meter.Int64ObservableCounter("berth.hold.batch_reruns", metric.WithUnit("{transaction}"),
		metric.WithDescription("Hold batches run again, checked before their COMMIT, after a guard of their committing round trip fired (a key taken, a guest at a limit)."))
	groups, err5 := t.meter.Int64ObservableCounter("berth.hold.groups", metric.WithUnit("{transaction}"),
		metric.WithDescription("Hold group transactions committed (holds of idle room types sharing one transaction while every lane was busy)."))
	grouped, err6 := t.meter.Int64ObservableCounter("berth.hold.grouped", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds decided in a group transaction."))
	phase, err7 := t.meter.Float64ObservableCounter("berth.hold.batch_phase", metric.WithUnit("s"),
		metric.WithDescription("Committed hold batches' time by phase: lock (BEGIN and the nights locked), decide (the decision and the writes built), commit (the writes and COMMIT)."))
	keyReads, err8 := t.meter.Int64ObservableCounter("berth.hold.refusal_key_reads", metric.WithUnit("{statement}"),
		metric.WithDescription("Statements reading the Idempotency-Keys of holds the sold-out cache refused (coalesced per hotel)."))
	keysRead, err9 := t.meter.Int64ObservableCounter("berth.hold.refusal_keys_read", metric.WithUnit("{key}"),
		metric.WithDescription("Idempotency-Keys of holds the sold-out cache refused, read by those statements."))
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7, err8, err9); err != nil {
		return fmt.Errorf("hold batch instruments: %w", err)
	}
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stat()
		o.ObserveInt64(batches, s.Batches, t.attrs())
		o.ObserveInt64(batched, s.Batched, t.attrs())
		o.ObserveInt64(alone, s.Alone, t.attrs())
		o.ObserveInt64(reruns, s.Reruns, t.attrs())
		o.ObserveInt64(groups, s.Groups, t.attrs())
		o.ObserveInt64(grouped, s.Grouped, t.attrs())
		o.ObserveFloat64(phase, s.Lock.Seconds(), t.attrs(attribute.String("phase", "lock")))
		o.ObserveFloat64(phase, s.Decide.Seconds(), t.attrs(attribute.String("phase", "decide")))
		o.ObserveFloat64(phase, s.Commit.Seconds(), t.attrs(attribute.String("phase", "commit")))
		o.ObserveInt64(keyReads, s.KeyReads, t.attrs())
		o.ObserveInt64(keysRead, s.KeysRead, t.attrs())
		return nil
	}, batches, batched, alone, reruns, groups, grouped, phase, keyReads, keysRead)
	return err
}

// CacheStats is what the regional read cache's invalidations did since the
// service started (rediscache.Stats).
type CacheStats struct {
	// Invalidations done, and of them those made for events; the rest are
	// writes' own.
	Invalidations, EventInvalidations int64
	// InvalidateErrors: invalidations that could not reach Redis.
	InvalidateErrors int64
	// BumpRounds: round trips to Redis that bumped generations, and of
	// them those sent with no write's invalidation in them; BumpKeys: the
	// generations those rounds bumped.
	BumpRounds, EventRounds, BumpKeys int64
}

// ObserveCache reports the cache's invalidations on every scrape:
// berth_cache_invalidations_total{source=write|event},
// berth_cache_invalidation_errors_total, berth_cache_bump_rounds_total{trigger=write|event}
// and berth_cache_bump_keys_total. Round trips per invalidation is
// rate(bump_rounds) / rate(invalidations), partitions per round
// rate(bump_keys) / rate(bump_rounds) (docs/PERFORMANCE.md, "CPU per hold").
func (t *Telemetry) ObserveCache(stat func() CacheStats) error {
	m := t.meter
	calls, err1 := m.Int64ObservableCounter("berth.cache.invalidations", metric.WithUnit("{invalidation}"),
		metric.WithDescription("Cache invalidations done, by source: a write's own (write) or an event's (event)."))
	errs, err2 := m.Int64ObservableCounter("berth.cache.invalidation_errors", metric.WithUnit("{invalidation}"),
		metric.WithDescription("Cache invalidations that could not reach Redis (retried by their caller; the TTL bounds the rest)."))
	rounds, err3 := m.Int64ObservableCounter("berth.cache.bump_rounds", metric.WithUnit("{round}"),
		metric.WithDescription("Round trips to Redis that bumped generations, by what sent them: a write's invalidation in the round, or events alone."))
	keys, err4 := m.Int64ObservableCounter("berth.cache.bump_keys", metric.WithUnit("{partition}"),
		metric.WithDescription("Generations bumped: one per distinct partition of a round."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fmt.Errorf("cache instruments: %w", err)
	}
	write, event := t.attrs(attribute.String("source", "write")), t.attrs(attribute.String("source", "event"))
	writeRound, eventRound := t.attrs(attribute.String("trigger", "write")), t.attrs(attribute.String("trigger", "event"))
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stat()
		o.ObserveInt64(calls, s.Invalidations-s.EventInvalidations, write)
		o.ObserveInt64(calls, s.EventInvalidations, event)
		o.ObserveInt64(errs, s.InvalidateErrors, t.attrs())
		o.ObserveInt64(rounds, s.BumpRounds-s.EventRounds, writeRound)
		o.ObserveInt64(rounds, s.EventRounds, eventRound)
		o.ObserveInt64(keys, s.BumpKeys, t.attrs())
		return nil
	}, calls, errs, rounds, keys)
	return err
}
