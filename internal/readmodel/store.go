package readmodel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/postgres"
	"github.com/jackc/pgx/v5"
)

// Store is the read model's database: its own tables (rm_*) in the same
// database as the booking tables, which it reads only to rebuild and verify.
type Store struct {
	db *postgres.DB
}

// NewStore returns a read-model store.
func NewStore(db *postgres.DB) *Store { return &Store{db: db} }

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

func upsertArgs(it Item) []any {
	return []any{it.Kind, it.PartitionID, it.ID, it.GuestID, it.Status, it.Start, it.End, it.SortAt, it.Title,
		it.ContactEmail, it.ContactPhone, it.Version, it.UpdatedAt, it.EventTime}
}

// MarkProcessed records, inside tx, that consumer applied eventID; false
// means it already had (the caller then changes nothing).
func MarkProcessed(ctx context.Context, tx pgx.Tx, consumer, eventID string) (bool, error) {
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
func (s *Store) Apply(ctx context.Context, consumer, eventID string, it *Item) (fresh, changed bool, err error) {
	err = s.db.InTx(ctx, func(tx pgx.Tx) error {
		fresh, changed = false, false
		ok, err := MarkProcessed(ctx, tx, consumer, eventID)
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

// Query selects a page of a guest's items.
type Query struct {
	GuestID string
	Kind    string // "" for all
	Status  string // "" for all
	Limit   int
	After   *Position
}

// Position is a keyset position in a guest's items.
type Position struct {
	SortAt      time.Time `json:"s"`
	Kind        string    `json:"k"`
	PartitionID string    `json:"p"`
	ID          string    `json:"i"`
}

// List returns up to q.Limit items after q.After, and whether more follow.
func (s *Store) List(ctx context.Context, q Query) ([]Item, bool, error) {
	sql := `SELECT kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title, version, updated_at, event_time
		FROM rm_reservations
		WHERE guest_id = $1 AND ($2 = '' OR kind = $2) AND ($3 = '' OR status = $3)`
	args := []any{q.GuestID, q.Kind, q.Status, q.Limit + 1}
	if q.After != nil {
		sql += ` AND (sort_at, kind, partition_id, id) > ($5, $6, $7, $8)`
		args = append(args, q.After.SortAt, q.After.Kind, q.After.PartitionID, q.After.ID)
	}
	sql += ` ORDER BY sort_at, kind, partition_id, id LIMIT $4`
	rows, err := s.db.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list view: %w", err)
	}
	defer rows.Close()
	var items []Item
	for rows.Next() {
		var it Item
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
	more := len(items) > q.Limit
	if more {
		items = items[:q.Limit]
	}
	return items, more, nil
}

// Get returns one item of the view.
func (s *Store) Get(ctx context.Context, kind, partitionID, id string) (Item, error) {
	var it Item
	err := s.db.Pool.QueryRow(ctx, `SELECT kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title, version, updated_at
		FROM rm_reservations WHERE kind = $1 AND partition_id = $2 AND id = $3`, kind, partitionID, id).Scan(
		&it.Kind, &it.PartitionID, &it.ID, &it.GuestID, &it.Status, &it.Start, &it.End, &it.SortAt, &it.Title, &it.Version, &it.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return it, ErrNotFound
	}
	if err != nil {
		return it, fmt.Errorf("get view item: %w", err)
	}
	return it, nil
}

// ErrNotFound reports an item missing from the view.
var ErrNotFound = errors.New("not in the view")

// PruneProcessed forgets processed-event ids older than keep (far beyond
// the stream's duplicate window and any redelivery).
func (s *Store) PruneProcessed(ctx context.Context, keep time.Duration, limit int) (int, error) {
	tag, err := s.db.Pool.Exec(ctx, `DELETE FROM rm_processed_events WHERE (consumer, event_id) IN (
		SELECT consumer, event_id FROM rm_processed_events WHERE processed_at < now() - $1 * INTERVAL '1 microsecond' LIMIT $2)`,
		keep.Microseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune processed events: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
