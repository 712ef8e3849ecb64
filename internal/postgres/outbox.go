package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/jsonscan"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// event is one outbox row to append inside a write transaction.
type event struct {
	kind        berth.Kind
	partitionID string
	typ         string
	aggregateID string
	version     int64
	data        any
}

// insertOutboxSQL appends one event to the outbox.
const insertOutboxSQL = `INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type, aggregate_id, aggregate_version, seq, payload, trace_context)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

// newEventID returns a fresh event id. A new id per attempt is fine: a
// rolled-back attempt's row never existed.
func newEventID() string { return uuid.NewString() }

// queueEvents queues events for the outbox in the caller's transaction, in
// order (seq), so the relay can publish a partition's events in order. Each
// row keeps the trace context of ctx (the writing request), which the relay
// hands on to the consumers in the message headers.
func queueEvents(ctx context.Context, b *pgx.Batch, region string, events ...event) error {
	tc := traceContext(ctx)
	for i, e := range events {
		payload, err := eventPayload(e)
		if err != nil {
			return err
		}
		b.Queue(insertOutboxSQL,
			e.partitionID, newEventID(), region, string(e.kind), e.typ, e.aggregateID, e.version, i, payload, tc)
	}
	return nil
}

// eventPayload encodes e's data for its outbox row. A reservation's (every
// hold writes one) is written by hand with json.Marshal's very bytes
// (reservation's AppendJSON, FuzzWithInventoryJSON), without encoding/json's
// reflection; anything else, and what the hand way does not write, by
// encoding/json.
func eventPayload(e event) ([]byte, error) {
	var (
		payload []byte
		ok      bool
	)
	switch d := e.data.(type) {
	case reservation.WithInventory:
		payload, ok = d.AppendJSON(make([]byte, 0, 1024))
	case reservation.Reservation:
		payload, ok = d.AppendJSON(make([]byte, 0, 640))
	}
	if ok {
		return payload, nil
	}
	payload, err := json.Marshal(e.data)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", e.typ, err)
	}
	return payload, nil
}

// traceContext encodes the W3C trace context of ctx (traceparent, and
// tracestate when set) as a small JSON object, or returns nil (SQL NULL) when
// ctx carries no span. Only the trace context is kept, explicitly rather
// than through the global propagator: baggage may carry personal data, and
// an outbox row outlives its request by days.
//
// Every write of a traced request (in a service, every request has a span)
// stores one, so it is written without a map or encoding/json's reflection
// when its values are plain (traceCarrier), with the bytes json.Marshal
// writes for the map of them (FuzzTraceContext).
func traceContext(ctx context.Context) *string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil // what Inject writes for no span: nothing (and no map to make)
	}
	var tc traceCarrier
	propagation.TraceContext{}.Inject(ctx, &tc)
	if tc.parent == "" {
		return nil
	}
	if s, ok := tc.plainJSON(); ok {
		return &s
	}
	c := propagation.MapCarrier{"traceparent": tc.parent}
	if tc.hasState {
		c["tracestate"] = tc.state
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil // a map of strings always encodes
	}
	s := string(b)
	return &s
}

// traceCarrier is the carrier TraceContext.Inject writes traceparent and
// tracestate to, which are all it writes (other notes anything else, and
// then the JSON is left to the map's encoding).
type traceCarrier struct {
	parent, state   string
	hasState, other bool
}

func (c *traceCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *traceCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state, c.hasState = value, true
	default:
		c.other = true
	}
}

func (c *traceCarrier) Keys() []string {
	keys := []string{"traceparent"}
	if c.hasState {
		keys = append(keys, "tracestate")
	}
	return keys
}

// plainJSON is json.Marshal of the map {traceparent, tracestate} (its keys
// sorted) when both values are printable ASCII with nothing to escape; ok
// is false otherwise.
func (c *traceCarrier) plainJSON() (s string, ok bool) {
	if c.other || !jsonscan.Plain(c.parent) || !jsonscan.Plain(c.state) {
		return "", false
	}
	if !c.hasState {
		return `{"traceparent":"` + c.parent + `"}`, true
	}
	return `{"traceparent":"` + c.parent + `","tracestate":"` + c.state + `"}`, true
}

// decodeTraceContext reverses traceContext. A value that does not decode is
// dropped: a lost trace link must never stop an event.
func decodeTraceContext(s *string) map[string]string {
	if s == nil || *s == "" {
		return nil
	}
	var c map[string]string
	if json.Unmarshal([]byte(*s), &c) != nil || c["traceparent"] == "" {
		return nil
	}
	return c
}

// outboxBacklogSQL is cheap: outbox_unsent_region_idx covers the region's
// unsent rows, which the relay keeps few.
const outboxBacklogSQL = `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::FLOAT8
	FROM outbox WHERE sent_at IS NULL AND home_region = $1`

// OutboxBacklog reports how many events of region's partitions wait for
// the relay and how long the oldest has waited.
func (db *DB) OutboxBacklog(ctx context.Context, region string) (n int64, oldest time.Duration, err error) {
	var age float64
	if err := db.pool.QueryRow(ctx, outboxBacklogSQL, region).Scan(&n, &age); err != nil {
		return 0, 0, fmt.Errorf("outbox backlog: %w", err)
	}
	return n, time.Duration(age * float64(time.Second)), nil
}
