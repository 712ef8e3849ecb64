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

// newerVersionWinsSQL ends every write of a view item: an item already
// there is replaced only by a newer version of it (an old event delivered
// late never wins), and a contact a newer version leaves out is kept.
const newerVersionWinsSQL = `
ON CONFLICT (kind, partition_id, id) DO UPDATE SET
    guest_id = excluded.guest_id, status = excluded.status, start_at = excluded.start_at,
    end_at = excluded.end_at, sort_at = excluded.sort_at, title = excluded.title,
    contact_email = COALESCE(excluded.contact_email, rm_reservations.contact_email),
    contact_phone = COALESCE(excluded.contact_phone, rm_reservations.contact_phone),
    contact_push_token = COALESCE(excluded.contact_push_token, rm_reservations.contact_push_token),
    version = excluded.version, updated_at = excluded.updated_at, event_time = excluded.event_time
WHERE rm_reservations.version < excluded.version`

// upsertSQL writes an item unless the view already holds the same or a
// newer version of it: an old event delivered late never wins.
const upsertSQL = `
INSERT INTO rm_reservations (kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title,
    contact_email, contact_phone, version, updated_at, event_time, contact_push_token)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($10, ''), NULLIF($11, ''), $12, $13, $14, NULLIF($15, ''))
` + newerVersionWinsSQL

func upsertArgs(it view.Item) []any {
	return []any{it.Kind, it.PartitionID, it.ID, it.GuestID, it.Status, it.Start, it.End, it.SortAt, it.Title,
		it.ContactEmail, it.ContactPhone, it.Version, it.UpdatedAt, it.EventTime, it.ContactPushToken}
}

// applySQL records that a consumer applied an event and upserts the view
// row, in one statement (so one implicit transaction and one round trip
// instead of BEGIN, two statements and COMMIT: the projection is a large
// part of what each hold costs the platform, docs/PERFORMANCE.md). The
// upsert reads its row from mark, so a duplicate event (mark empty)
// changes nothing; the casts type the parameters that INSERT … SELECT
// cannot take from the columns. Its columns are upsertSQL's, in the same
// order (upsertArgs feeds both; TestReadModelApplyOnce fails when they
// drift apart).
const applySQL = `
WITH mark AS (
    INSERT INTO rm_processed_events (consumer, event_id) VALUES ($1, $2)
    ON CONFLICT (consumer, event_id) DO NOTHING
    RETURNING 1
), up AS (
    INSERT INTO rm_reservations (kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title,
        contact_email, contact_phone, version, updated_at, event_time, contact_push_token)
    SELECT $3::TEXT, $4::TEXT, $5::TEXT, $6::TEXT, $7::TEXT, $8::TEXT, $9::TEXT, $10::TIMESTAMPTZ, $11::TEXT,
        NULLIF($12::TEXT, ''), NULLIF($13::TEXT, ''), $14::INT8, $15::TIMESTAMPTZ, $16::TIMESTAMPTZ, NULLIF($17::TEXT, '')
    FROM mark
` + newerVersionWinsSQL + `
    RETURNING 1
)
SELECT (SELECT count(*) FROM mark), (SELECT count(*) FROM up)`

// Apply applies one projected event once: the processed-event id and the
// view row are written in one statement (atomic on its own). It reports
// whether the event was new (a duplicate changes nothing) and whether the
// row changed. A failure leaves nothing behind, so the event's redelivery
// (consumers retry transient failures) applies it whole.
func (s *ReadModel) Apply(ctx context.Context, consumer, eventID string, it *view.Item) (fresh, changed bool, err error) {
	if it == nil {
		tag, err := s.db.pool.Exec(ctx,
			`INSERT INTO rm_processed_events (consumer, event_id) VALUES ($1, $2) ON CONFLICT (consumer, event_id) DO NOTHING`,
			consumer, eventID)
		if err != nil {
			return false, false, classify(fmt.Errorf("mark event processed: %w", err))
		}
		return tag.RowsAffected() == 1, false, nil
	}
	var marked, upserted int64
	args := append([]any{consumer, eventID}, upsertArgs(*it)...)
	if err := s.db.pool.QueryRow(ctx, applySQL, args...).Scan(&marked, &upserted); err != nil {
		return false, false, classify(fmt.Errorf("apply event to the view: %w", err))
	}
	return marked == 1, upserted == 1, nil
}

// applyAllSQL is applySQL for many events in one statement (so one
// implicit transaction, one round trip and one commit for a whole round of
// events instead of one of each per event; docs/adr/0021-read-model-rounds.md).
// The events come as parallel arrays, one element per event; an event the
// view ignores has kind ”. The caller names each event id and each view row
// at most once (an INSERT … ON CONFLICT DO UPDATE cannot touch one row
// twice), so every row is what applySQL would make of its events applied one
// after another: a duplicate (not marked now) changes nothing, and an older
// version never overwrites a newer one. It answers, per event, whether it was
// new and whether its row changed.
const applyAllSQL = `
WITH ev AS (
    SELECT * FROM unnest($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::TEXT[], $9::TEXT[],
        $10::TIMESTAMPTZ[], $11::TEXT[], $12::TEXT[], $13::TEXT[], $14::INT8[], $15::TIMESTAMPTZ[], $16::TIMESTAMPTZ[], $17::TEXT[])
        AS e (event_id, kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title,
            contact_email, contact_phone, version, updated_at, event_time, contact_push_token)
), mark AS (
    INSERT INTO rm_processed_events (consumer, event_id)
    SELECT $1::TEXT, event_id FROM ev
    ON CONFLICT (consumer, event_id) DO NOTHING
    RETURNING event_id
), up AS (
    INSERT INTO rm_reservations (kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title,
        contact_email, contact_phone, version, updated_at, event_time, contact_push_token)
    SELECT ev.kind, ev.partition_id, ev.id, ev.guest_id, ev.status, ev.start_at, ev.end_at, ev.sort_at, ev.title,
        NULLIF(ev.contact_email, ''), NULLIF(ev.contact_phone, ''), ev.version, ev.updated_at, ev.event_time,
        NULLIF(ev.contact_push_token, '')
    FROM ev JOIN mark ON mark.event_id = ev.event_id
    WHERE ev.kind <> ''
` + newerVersionWinsSQL + `
    RETURNING kind, partition_id, id
)
SELECT ev.event_id, mark.event_id IS NOT NULL, up.id IS NOT NULL
FROM ev
LEFT JOIN mark ON mark.event_id = ev.event_id
LEFT JOIN up ON up.kind = ev.kind AND up.partition_id = ev.partition_id AND up.id = ev.id`

// ApplyAll applies many projected events in one statement: Apply for each,
// atomically together (all or nothing: a failure leaves nothing behind, so
// the events' redelivery, or each applied alone, applies them whole). cs
// must name each event id and each view row (kind, partition, id) at most
// once; the result is in the order of cs.
func (s *ReadModel) ApplyAll(ctx context.Context, consumer string, cs []view.Change) ([]view.Applied, error) {
	n := len(cs)
	var (
		ids, kinds, parts, rows, guests, statuses, starts, ends = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		titles, emails, phones, tokens = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		sortAt, updated, evTime        = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		versions                       = make([]int64, n)
		at                             = make(map[string]int, n)
	)
	for i, c := range cs {
		if _, dup := at[c.EventID]; dup {
			return nil, fmt.Errorf("apply events to the view: event %s twice in one statement", c.EventID)
		}
		at[c.EventID] = i
		ids[i] = c.EventID
		if it := c.Item; it != nil {
			kinds[i], parts[i], rows[i], guests[i], statuses[i] = it.Kind, it.PartitionID, it.ID, it.GuestID, it.Status
			starts[i], ends[i], sortAt[i], titles[i] = it.Start, it.End, it.SortAt, it.Title
			emails[i], phones[i], tokens[i] = it.ContactEmail, it.ContactPhone, it.ContactPushToken
			versions[i], updated[i], evTime[i] = it.Version, it.UpdatedAt, it.EventTime
		}
	}
	out := make([]view.Applied, n)
	dbRows, err := s.db.pool.Query(ctx, applyAllSQL, consumer, ids, kinds, parts, rows, guests, statuses, starts, ends,
		sortAt, titles, emails, phones, versions, updated, evTime, tokens)
	if err != nil {
		return nil, classify(fmt.Errorf("apply events to the view: %w", err))
	}
	defer dbRows.Close()
	for dbRows.Next() {
		var (
			id      string
			applied view.Applied
		)
		if err := dbRows.Scan(&id, &applied.Fresh, &applied.Changed); err != nil {
			return nil, classify(fmt.Errorf("apply events to the view: %w", err))
		}
		if i, ok := at[id]; ok {
			out[i] = applied
		}
	}
	if err := dbRows.Err(); err != nil {
		return nil, classify(fmt.Errorf("apply events to the view: %w", err))
	}
	return out, nil
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
