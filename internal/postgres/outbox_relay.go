package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/jackc/pgx/v5"
)

// claimOutboxSQL claims the oldest unsent events of partitions homed in a
// region. SKIP LOCKED lets several relay replicas of one region share the
// work; the rows stay locked until the claiming transaction ends, so a
// batch in flight is never claimed twice.
const claimOutboxSQL = `
SELECT partition_id::TEXT, event_id::TEXT, home_region, kind, event_type, aggregate_id::TEXT,
       aggregate_version, seq, payload, created_at, trace_context
FROM outbox
WHERE sent_at IS NULL AND home_region = $1
ORDER BY created_at, seq
LIMIT $2
FOR UPDATE SKIP LOCKED`

// blockedPartitionsSQL finds partitions of a claimed batch that have an
// earlier unsent event outside the batch (locked by another replica, which
// SKIP LOCKED hid from us): publishing theirs now would overtake it.
const blockedPartitionsSQL = `
SELECT DISTINCT o.partition_id::TEXT
FROM outbox AS o
JOIN unnest($1::UUID[], $2::TIMESTAMPTZ[], $3::INT4[]) AS f(pid, ca, sq) ON o.partition_id = f.pid
WHERE o.sent_at IS NULL AND (o.created_at < f.ca OR (o.created_at = f.ca AND o.seq < f.sq))`

const markSentSQL = `
UPDATE outbox SET sent_at = now()
WHERE (partition_id, event_id) IN (SELECT p, e FROM unnest($1::UUID[], $2::UUID[]) AS t(p, e))`

// RelayOutbox claims up to limit unsent events of the store's region, in
// (created_at, seq) order, and hands them to publish while the claim holds.
// publish returns the ids of the events the broker acknowledged; only those
// are marked sent, in the same transaction as the claim. When publish fails
// (or the process dies) the transaction rolls back and the events stay
// unsent, to be published again — the broker drops the duplicates by id.
//
// The claiming transaction is held open across the publish on purpose: it
// locks only outbox rows (no booking transaction waits on them), and it is
// what stops two replicas publishing one event concurrently.
func (s *Store) RelayOutbox(ctx context.Context, limit int,
	publish func(ctx context.Context, recs []events.Record) (acked []string, err error)) (sent int, err error) {
	tx, err := s.db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, fmt.Errorf("relay outbox: begin: %w", err)
	}
	// Unconditional, so that a panic (in publish, say) also ends the claim
	// at once instead of leaving its rows locked — and skipped by every
	// replica's SKIP LOCKED — for as long as the process lives.
	defer rollback(ctx, tx)
	recs, err := claimOutbox(ctx, tx, s.region, limit)
	if err != nil || len(recs) == 0 {
		if err == nil {
			err = tx.Commit(ctx)
		}
		return 0, err
	}
	recs, err = dropBlocked(ctx, tx, recs)
	if err != nil || len(recs) == 0 {
		if err == nil {
			err = tx.Commit(ctx)
		}
		return 0, err
	}
	acked, err := publish(ctx, recs)
	if err != nil && len(acked) == 0 {
		return 0, fmt.Errorf("relay outbox: publish: %w", err)
	}
	pubErr := err
	if len(acked) > 0 {
		byID := make(map[string]string, len(recs))
		for _, r := range recs {
			byID[r.EventID] = r.PartitionID
		}
		pids := make([]string, 0, len(acked))
		for _, id := range acked {
			pids = append(pids, byID[id])
		}
		if _, err = tx.Exec(ctx, markSentSQL, pids, acked); err != nil {
			return 0, fmt.Errorf("relay outbox: mark sent: %w", err)
		}
	}
	if err = tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("relay outbox: commit: %w", err)
	}
	if pubErr != nil {
		return len(acked), fmt.Errorf("relay outbox: publish (partly acknowledged): %w", pubErr)
	}
	return len(acked), nil
}

func claimOutbox(ctx context.Context, tx pgx.Tx, region string, limit int) ([]events.Record, error) {
	rows, err := tx.Query(ctx, claimOutboxSQL, region, limit)
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	defer rows.Close()
	var recs []events.Record
	for rows.Next() {
		var (
			r   events.Record
			seq int32
			tc  *string
		)
		if err := rows.Scan(&r.PartitionID, &r.EventID, &r.HomeRegion, &r.Kind, &r.Type, &r.AggregateID,
			&r.AggregateVersion, &seq, &r.Payload, &r.CreatedAt, &tc); err != nil {
			return nil, fmt.Errorf("claim outbox: %w", err)
		}
		r.Seq, r.CreatedAt, r.TraceContext = int(seq), r.CreatedAt.UTC(), decodeTraceContext(tc)
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	return recs, nil
}

// dropBlocked removes from recs every partition that has an earlier unsent
// event outside recs; those partitions wait for the next round.
func dropBlocked(ctx context.Context, tx pgx.Tx, recs []events.Record) ([]events.Record, error) {
	first := map[string]int{} // partition → index of its first record
	var (
		pids []string
		cas  []time.Time
		sqs  []int32
	)
	for i, r := range recs {
		if _, ok := first[r.PartitionID]; !ok {
			first[r.PartitionID] = i
			pids, cas, sqs = append(pids, r.PartitionID), append(cas, r.CreatedAt), append(sqs, int32(r.Seq))
		}
	}
	rows, err := tx.Query(ctx, blockedPartitionsSQL, pids, cas, sqs)
	if err != nil {
		return nil, fmt.Errorf("check outbox order: %w", err)
	}
	blocked := map[string]bool{}
	for rows.Next() {
		var pid string
		if err := rows.Scan(&pid); err != nil {
			rows.Close()
			return nil, fmt.Errorf("check outbox order: %w", err)
		}
		blocked[pid] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check outbox order: %w", err)
	}
	if len(blocked) == 0 {
		return recs, nil
	}
	kept := recs[:0]
	for _, r := range recs {
		if !blocked[r.PartitionID] {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// PruneOutbox deletes sent events of the store's region older than keep, at
// most limit per call, and reports how many it deleted.
func (s *Store) PruneOutbox(ctx context.Context, keep time.Duration, limit int) (int, error) {
	tag, err := s.db.pool.Exec(ctx,
		`DELETE FROM outbox WHERE (partition_id, event_id) IN (
		   SELECT partition_id, event_id FROM outbox
		   WHERE sent_at IS NOT NULL AND sent_at < now() - $1 * INTERVAL '1 microsecond' AND home_region = $2
		   LIMIT $3)`, keep.Microseconds(), s.region, limit)
	if err != nil {
		return 0, fmt.Errorf("prune outbox: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// UnsentOutbox counts the unsent events of the store's region.
func (s *Store) UnsentOutbox(ctx context.Context) (int, error) {
	var n int
	err := s.db.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND home_region = $1`, s.region).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count unsent outbox: %w", err)
	}
	return n, nil
}
