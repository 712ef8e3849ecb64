package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// claimKeySQL records an Idempotency-Key at the start of a write transaction.
//
// The INSERT is the lock: a concurrent request with the same key blocks on
// the uncommitted row until the first commits (then it replays the stored
// response) or rolls back (then it proceeds as the first). If it waits past
// lock_timeout, it answers 409 idempotency_in_progress. A stored key with a
// different request hash is 422 idempotency_key_reused.
const claimKeySQL = `INSERT INTO idempotency_keys (partition_id, idem_key, home_region, request_hash)
	VALUES ($1, $2, $3, $4) ON CONFLICT (partition_id, idem_key) DO NOTHING`

// claimEventSQL is claimKeySQL for the payment provider's event ids, which
// live in their own table: a client's Idempotency-Key can never be an event
// id, whatever it spells. An event id is unique across partitions, so the
// same id naming another partition is a different request (422).
const claimEventSQL = `INSERT INTO webhook_events (partition_id, event_id, home_region, request_hash)
	VALUES ($1, $2, $3, $4) ON CONFLICT (event_id) DO NOTHING`

// claimSQLOf returns the claim statement of idem's key space.
func claimSQLOf(idem *berth.Idem) string {
	if idem.Webhook {
		return claimEventSQL
	}
	return claimKeySQL
}

// claimResult interprets the claim INSERT's outcome: nil, nil when this
// request owns the key; a stored response to replay; or an error.
func claimResult(ctx context.Context, tx pgx.Tx, tag pgconn.CommandTag, err error, partitionID string, idem *berth.Idem) (*berth.Response, error) {
	if err != nil {
		return nil, claimError(err)
	}
	if tag.RowsAffected() == 1 {
		return nil, nil
	}
	return storedResponse(ctx, tx, partitionID, idem)
}

// claimError interprets a failed claim: waiting past lock_timeout on a
// duplicate still running is 409 idempotency_in_progress.
func claimError(err error) error {
	if sqlState(err) == "55P03" {
		return &berth.Error{Code: berth.CodeIdempotencyInProgress,
			Detail: "a request with this Idempotency-Key is still running", RetryAfter: 1, Err: err}
	}
	return fmt.Errorf("claim idempotency key: %w", err)
}

// storedKeyAnswerSQL reads what is stored with a key: its request's
// fingerprint and answer.
const storedKeyAnswerSQL = `SELECT request_hash, response_status, response_body FROM idempotency_keys
	WHERE partition_id = $1 AND idem_key = $2`

// storedResponse reads the answer stored with a key claimed by another
// request, to replay it.
func storedResponse(ctx context.Context, q querier, partitionID string, idem *berth.Idem) (*berth.Response, error) {
	var (
		hash   string
		status *int32
		body   []byte
	)
	var err error
	if idem.Webhook {
		err = q.QueryRow(ctx, `SELECT request_hash, response_status, response_body FROM webhook_events
			 WHERE event_id = $1`, idem.Key).Scan(&hash, &status, &body)
	} else {
		err = q.QueryRow(ctx, storedKeyAnswerSQL, partitionID, idem.Key).Scan(&hash, &status, &body)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// Pruned between the claim and this read: let the whole write retry.
		return nil, fmt.Errorf("idempotency key vanished: %w", errRetry)
	}
	if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	if hash != idem.Hash {
		return nil, berth.Errorf(berth.CodeIdempotencyKeyReused,
			"this Idempotency-Key was used with a different request")
	}
	if status == nil {
		// Committed without a response cannot happen (the response is written
		// in the same transaction); treat it as still running.
		return nil, berth.Errorf(berth.CodeIdempotencyInProgress, "a request with this Idempotency-Key is still running")
	}
	return &berth.Response{Status: int(*status), Body: body, Replayed: true}, nil
}

// storeResponseSQL writes the answer of a write next to its claimed key.
const storeResponseSQL = `UPDATE idempotency_keys SET response_status = $3, response_body = $4
	WHERE partition_id = $1 AND idem_key = $2`

// storeEventResponseSQL is storeResponseSQL for a webhook event id.
const storeEventResponseSQL = `UPDATE webhook_events SET response_status = $3, response_body = $4
	WHERE partition_id = $1 AND event_id = $2`

func queueStoreResponse(b *pgx.Batch, partitionID string, idem *berth.Idem, resp berth.Response) {
	if idem.Webhook {
		b.Queue(storeEventResponseSQL, partitionID, idem.Key, resp.Status, resp.Body)
		return
	}
	b.Queue(storeResponseSQL, partitionID, idem.Key, resp.Status, resp.Body)
}

// PruneIdempotencyKeys deletes keys older than keep (at least 24 h by
// contract), at most limit rows per call; it returns how many it deleted.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, keep time.Duration, limit int) (int64, error) {
	tag, err := s.db.pool.Exec(ctx,
		`DELETE FROM idempotency_keys WHERE (partition_id, idem_key) IN (
		   SELECT partition_id, idem_key FROM idempotency_keys
		   WHERE created_at < now() - $1 * INTERVAL '1 microsecond' AND home_region = $2 LIMIT $3)`,
		keep.Microseconds(), s.region, limit)
	if err != nil {
		return 0, fmt.Errorf("prune idempotency keys: %w", err)
	}
	events, err := s.db.pool.Exec(ctx,
		`DELETE FROM webhook_events WHERE event_id IN (
		   SELECT event_id FROM webhook_events
		   WHERE created_at < now() - $1 * INTERVAL '1 microsecond' AND home_region = $2 LIMIT $3)`,
		keep.Microseconds(), s.region, limit)
	if err != nil {
		return 0, fmt.Errorf("prune webhook events: %w", err)
	}
	return tag.RowsAffected() + events.RowsAffected(), nil
}
