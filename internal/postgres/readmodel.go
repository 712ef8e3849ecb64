package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/view"
	"github.com/jackc/pgx/v5"
)

// ReadModel keeps the per-guest view: its own tables (rm_*) in the same
// database as the booking tables, which it reads only to rebuild and verify
// the view.
type ReadModel struct {
	db *DB
}

// NewReadModel returns the read model's store on db.
func NewReadModel(db *DB) *ReadModel { return &ReadModel{db: db} }

// upsertSQL writes an item unless the view already holds the same or a
// newer version of it: an old event delivered late never wins.
const upsertSQL = `
INSERT INTO rm_reservations (kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title,
    contact_email, contact_phone, version, updated_at, event_time)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($10, ''), NULLIF($11, ''), $12, $13, $14)
ON CONFLICT (kind, partition_id, id) DO UPDATE SET
    guest_id = excluded.guest_id, status = excluded.status, start_at = excluded.start_at,
    end_at = excluded.end_at, sort_at = excluded.sort_at, title = excluded.title,
    contact_email = COALESCE(excluded.contact_email, rm_reservations.contact_email),
    contact_phone = COALESCE(excluded.contact_phone, rm_reservations.contact_phone),
    version = excluded.version, updated_at = excluded.updated_at, event_time = excluded.event_time
WHERE rm_reservations.version < excluded.version`

func upsertArgs(it view.Item) []any {
	return []any{it.Kind, it.PartitionID, it.ID, it.GuestID, it.Status, it.Start, it.End, it.SortAt, it.Title,
		it.ContactEmail, it.ContactPhone, it.Version, it.UpdatedAt, it.EventTime}
}

// markProcessed records, inside tx, that consumer applied eventID; false
// means it already had (the caller then changes nothing).
func markProcessed(ctx context.Context, tx pgx.Tx, consumer, eventID string) (bool, error) {
	tag, err := tx.Exec(ctx,
		`INSERT INTO rm_processed_events (consumer, event_id) VALUES ($1, $2) ON CONFLICT (consumer, event_id) DO NOTHING`,
		consumer, eventID)
	if err != nil {
		return false, fmt.Errorf("mark event processed: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Apply applies one projected event once: the processed-event id and the
// view row are written in one transaction. It reports whether the event was
// new (a duplicate changes nothing) and whether the row changed.
func (s *ReadModel) Apply(ctx context.Context, consumer, eventID string, it *view.Item) (fresh, changed bool, err error) {
	err = s.db.InTx(ctx, func(tx pgx.Tx) error {
		fresh, changed = false, false
		ok, err := markProcessed(ctx, tx, consumer, eventID)
		if err != nil || !ok {
			return err
		}
		fresh = true
		if it == nil {
			return nil
		}
		tag, err := tx.Exec(ctx, upsertSQL, upsertArgs(*it)...)
		if err != nil {
			return fmt.Errorf("upsert view: %w", err)
		}
		changed = tag.RowsAffected() == 1
		return nil
	})
	return fresh, changed, err
}

// List returns up to q.Limit items after q.After, and whether more follow.
// A failure of the database itself (down, too busy, too slow) is a 503
// (berth.CodeUnavailable) for the partner API; any other error is a bug.
func (s *ReadModel) List(ctx context.Context, q view.Query) (items []view.Item, more bool, err error) {
	defer func() {
		if IsTransient(err) {
			err = &berth.Error{Code: berth.CodeUnavailable, Detail: "the read model is unavailable", RetryAfter: 1, Err: err}
		}
	}()
	sql := `SELECT kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title, version, updated_at, event_time
		FROM rm_reservations
		WHERE guest_id = $1 AND ($2 = '' OR kind = $2) AND ($3 = '' OR status = $3)`
	args := []any{q.GuestID, q.Kind, q.Status, q.Limit + 1}
	if q.After != nil {
		sql += ` AND (sort_at, kind, partition_id, id) > ($5, $6, $7, $8)`
		args = append(args, q.After.SortAt, q.After.Kind, q.After.PartitionID, q.After.ID)
	}
	sql += ` ORDER BY sort_at, kind, partition_id, id LIMIT $4`
	rows, err := s.db.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list view: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var it view.Item
		if err := rows.Scan(&it.Kind, &it.PartitionID, &it.ID, &it.GuestID, &it.Status, &it.Start, &it.End,
			&it.SortAt, &it.Title, &it.Version, &it.UpdatedAt, &it.EventTime); err != nil {
			return nil, false, fmt.Errorf("list view: %w", err)
		}
		it.SortAt, it.UpdatedAt = it.SortAt.UTC(), it.UpdatedAt.UTC()
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list view: %w", err)
	}
	more = len(items) > q.Limit
	if more {
		items = items[:q.Limit]
	}
	return items, more, nil
}

// Get returns one item of the view.
func (s *ReadModel) Get(ctx context.Context, kind, partitionID, id string) (view.Item, error) {
	var it view.Item
	err := s.db.pool.QueryRow(ctx, `SELECT kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title, version, updated_at
		FROM rm_reservations WHERE kind = $1 AND partition_id = $2 AND id = $3`, kind, partitionID, id).Scan(
		&it.Kind, &it.PartitionID, &it.ID, &it.GuestID, &it.Status, &it.Start, &it.End, &it.SortAt, &it.Title, &it.Version, &it.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return it, view.ErrNotFound
	}
	if err != nil {
		return it, fmt.Errorf("get view item: %w", err)
	}
	return it, nil
}

// PruneProcessed forgets processed-event ids older than keep (far beyond
// the stream's duplicate window and any redelivery).
func (s *ReadModel) PruneProcessed(ctx context.Context, keep time.Duration, limit int) (int, error) {
	tag, err := s.db.pool.Exec(ctx, `DELETE FROM rm_processed_events WHERE (consumer, event_id) IN (
		SELECT consumer, event_id FROM rm_processed_events WHERE processed_at < now() - $1 * INTERVAL '1 microsecond' LIMIT $2)`,
		keep.Microseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune processed events: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
