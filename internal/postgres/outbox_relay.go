package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/jackc/pgx/v5"
)

// claimOutboxSQL claims the oldest unsent events of partitions homed in a
// region and, in the same statement, leaves out every partition that has an
// unsent event outside the claim ordered before one of its claimed events:
// publishing that partition's events now would overtake it. Such an event
// is one another replica holds (SKIP LOCKED hid it from us: it may sit
// before the partition's first claimed event or between two of them) or one
// the partition's former home region has not published yet (a moved
// partition's events keep the region that wrote them), so the check counts
// by partition, not by region (outbox_unsent_by_partition_idx): the unsent
// events of the partition up to its last claimed one must be exactly the
// claimed ones. SKIP LOCKED lets several relay replicas of one region share
// the work; the claimed rows stay locked until the claiming transaction
// ends, so a batch in flight is never claimed twice. The left-out
// partitions' rows stay locked too and wait for the next round.
//
// The check sees the claim's snapshot: an event the claim skipped because
// another replica holds it is unsent in that snapshot, so its partition is
// left out. (An event committed after the snapshot is seen by neither; a
// separate statement only narrowed that window, it never closed it: events
// of one partition written by concurrent transactions are ordered by
// (created_at, seq) only as far as their commits allow, ADR 0016.)
const claimOutboxSQL = `
WITH claimed AS (
	SELECT partition_id, event_id, home_region, kind, event_type, aggregate_id,
	       aggregate_version, seq, payload, created_at, trace_context
	FROM outbox
	WHERE sent_at IS NULL AND home_region = $1
	ORDER BY created_at, seq
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), lasts AS (
	SELECT DISTINCT ON (partition_id) partition_id, created_at, seq
	FROM claimed
	ORDER BY partition_id, created_at DESC, seq DESC
), counts AS (
	SELECT partition_id, count(*) AS n FROM claimed GROUP BY partition_id
), blocked AS (
	SELECT l.partition_id
	FROM lasts AS l JOIN counts AS c ON c.partition_id = l.partition_id
	WHERE c.n <> (SELECT count(*) FROM outbox AS o
	              WHERE o.partition_id = l.partition_id AND o.sent_at IS NULL
	                AND (o.created_at, o.seq) <= (l.created_at, l.seq))
)
SELECT partition_id::TEXT, event_id::TEXT, home_region, kind, event_type, aggregate_id::TEXT,
       aggregate_version, seq, payload, created_at, trace_context
FROM claimed
WHERE partition_id NOT IN (SELECT partition_id FROM blocked)
ORDER BY created_at, seq`

// relayPlanSQL keeps the relay's scans of the outbox to plain index scans
// on PostgreSQL. Marking an event sent leaves a dead entry in the partial
// indexes of unsent rows until VACUUM; a plain index scan that meets one
// marks it dead in the index (and later scans skip it without reading the
// heap), a bitmap scan never does. With few unsent rows in its statistics
// the planner prefers bitmap scans, and then every round read every row
// sent since the last VACUUM: measured at 5 ms per round and rising, more
// than the hold's own transaction per hold (docs/PERFORMANCE.md, ADR 0016).
// CockroachDB has no such setting and no such cost.
const relayPlanSQL = `SET LOCAL enable_bitmapscan = off`

const markSentSQL = `
UPDATE outbox SET sent_at = now()
WHERE (partition_id, event_id) IN (SELECT p, e FROM unnest($1::TEXT[]::UUID[], $2::TEXT[]::UUID[]) AS t(p, e))`

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
//
// On PostgreSQL a round is two round trips: BEGIN with the claim, then the
// mark with the COMMIT (a pipelined transaction, tx_pipelined.go); it was
// five (BEGIN, claim, order check, mark, COMMIT).
func (s *Store) RelayOutbox(ctx context.Context, limit int,
	publish func(ctx context.Context, recs []events.Record) (acked []string, err error)) (sent int, err error) {
	tx, release, err := s.relayTx(ctx)
	if err != nil {
		return 0, fmt.Errorf("relay outbox: begin: %w", err)
	}
	// Unconditional, so that a panic (in publish, say) also ends the claim
	// at once instead of leaving its rows locked — and skipped by every
	// replica's SKIP LOCKED — for as long as the process lives.
	defer func() {
		rollback(ctx, tx)
		release()
	}()
	recs, err := s.claimOutbox(ctx, tx, limit)
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
		b := &pgx.Batch{}
		b.Queue(markSentSQL, pids, acked)
		br := sendAndCommit(ctx, tx, b)
		_, markErr := br.Exec()
		if err = br.Close(); markErr != nil {
			return 0, fmt.Errorf("relay outbox: mark sent: %w", markErr)
		} else if err != nil {
			return 0, fmt.Errorf("relay outbox: %w", err)
		}
	}
	if err = tx.Commit(ctx); err != nil { // nothing left to do when the mark carried the COMMIT
		return 0, fmt.Errorf("relay outbox: commit: %w", err)
	}
	if pubErr != nil {
		return len(acked), fmt.Errorf("relay outbox: publish (partly acknowledged): %w", pubErr)
	}
	return len(acked), nil
}

// relayTx begins the relay's READ COMMITTED transaction: on PostgreSQL a
// pipelined one whose BEGIN goes with the claim, on CockroachDB pgx's.
// release returns its connection to the pool, after the rollback.
func (s *Store) relayTx(ctx context.Context) (tx pgx.Tx, release func(), err error) {
	if s.db.Engine == EngineCockroach {
		tx, err := s.db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		return tx, func() {}, err
	}
	c, err := s.db.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &pipeTx{conn: c.Conn(), begin: beginSQL(ReadCommitted)}, c.Release, nil
}

func (s *Store) claimOutbox(ctx context.Context, tx pgx.Tx, limit int) ([]events.Record, error) {
	b := &pgx.Batch{}
	planned := s.db.Engine != EngineCockroach
	if planned {
		b.Queue(relayPlanSQL)
	}
	b.Queue(claimOutboxSQL, s.region, limit)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if planned {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("claim outbox: %w", err)
		}
	}
	rows, err := br.Query()
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
	rows.Close()
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	return recs, nil
}

// PruneOutbox deletes sent events of the store's region older than keep, at
// most limit per call, and reports how many it deleted. A row is sent after
// it is created, so `created_at < cutoff` adds nothing to what is deleted;
// it is there for outbox_created_brin (PostgreSQL, 00960): the scan reads
// only the block ranges written before the cutoff instead of the whole
// outbox (docs/adr/0016-relay-round.md).
func (s *Store) PruneOutbox(ctx context.Context, keep time.Duration, limit int) (int, error) {
	tag, err := s.db.pool.Exec(ctx,
		`DELETE FROM outbox WHERE (partition_id, event_id) IN (
		   SELECT partition_id, event_id FROM outbox
		   WHERE created_at < now() - $1 * INTERVAL '1 microsecond'
		     AND sent_at IS NOT NULL AND sent_at < now() - $1 * INTERVAL '1 microsecond' AND home_region = $2
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
