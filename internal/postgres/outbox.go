package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/berthhq/berth/internal/berth"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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

// queueEvents queues events for the outbox in the caller's transaction, in
// order (seq), so the relay can publish a partition's events in order.
func queueEvents(b *pgx.Batch, region string, events ...event) error {
	for i, e := range events {
		payload, err := json.Marshal(e.data)
		if err != nil {
			return fmt.Errorf("encode %s event: %w", e.typ, err)
		}
		// A new id per attempt is fine: a rolled-back attempt's row never existed.
		b.Queue(
			`INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type, aggregate_id, aggregate_version, seq, payload)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			e.partitionID, uuid.NewString(), region, string(e.kind), e.typ, e.aggregateID, e.version, i, payload)
	}
	return nil
}
