package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/placement"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// partitionTable is a table holding rows of partitions: its name and the
// column that holds the partition id (the first column of its primary key).
// lockOrder, when set, names the rest of the primary key: a move locks the
// partition's rows of that table in this order before re-homing them.
type partitionTable struct {
	name, column, lockOrder string
}

// partitionTables lists, per kind, every table whose rows belong to one
// partition and carry home_region — the one place a move learns what to
// re-home, in the order it does. Add a new partition table here
// (TestPartitionTablesCoverSchema fails until you do).
//
// A move locks the placement row, then these tables in the order listed:
// the order is part of the lock order of docs/adr/0003-lock-order.md
// ("Moves"), which says why reservations come twice, around the nights.
var partitionTables = map[berth.Kind][]partitionTable{
	berth.KindHotel: {
		{name: "hotels", column: "hotel_id"},
		{name: "room_types", column: "hotel_id"},
		{name: "reservations", column: "hotel_id"},
		{name: "room_inventory", column: "hotel_id", lockOrder: "room_type_id, night"},
		{name: "reservations", column: "hotel_id"},
		{name: "rooms", column: "hotel_id", lockOrder: "room_id"},
		{name: "room_nights", column: "hotel_id", lockOrder: "room_id, night"},
		{name: "guest_holds", column: "hotel_id"},
		{name: "waitlist_queues", column: "hotel_id"},
		{name: "waitlist_entries", column: "hotel_id"},
		{name: "waitlist_events", column: "hotel_id"},
		{name: "walk_outcomes", column: "hotel_id"},
	},
	berth.KindClinic: {
		{name: "clinics", column: "clinic_id"},
		{name: "doctors", column: "clinic_id"},
		{name: "slots", column: "clinic_id"},
		{name: "appointments", column: "clinic_id"},
		{name: "clinic_guests", column: "clinic_id"},
		{name: "clinic_guest_days", column: "clinic_id"},
		{name: "slot_audit", column: "clinic_id"},
		{name: "clinic_waitlist_queues", column: "clinic_id"},
		{name: "clinic_waitlist_entries", column: "clinic_id"},
		{name: "clinic_waitlist_events", column: "clinic_id"},
	},
}

// rehomeSQL re-homes the rows of one partition in t to $1; $2 is the
// partition id. Table and column names come from partitionTables, never
// from input.
func (t partitionTable) rehomeSQL() string {
	if t.lockOrder == "" {
		return `UPDATE ` + t.name + ` SET home_region = $1 WHERE ` + t.column + ` = $2 AND home_region <> $1`
	}
	join := make([]string, 0, 2)
	for _, c := range strings.Split(t.lockOrder, ", ") {
		join = append(join, "t."+c+" = l."+c)
	}
	return `UPDATE ` + t.name + ` AS t SET home_region = $1
		FROM (SELECT ` + t.lockOrder + ` FROM ` + t.name + ` WHERE ` + t.column + ` = $2 ORDER BY ` + t.lockOrder + ` FOR UPDATE) AS l
		WHERE t.` + t.column + ` = $2 AND ` + strings.Join(join, " AND ") + ` AND t.home_region <> $1`
}

// sharedPartitionTables hold rows of every kind, keyed by partition_id; they
// are re-homed after the kind's own tables.
var sharedPartitionTables = []partitionTable{
	{name: "idempotency_keys", column: "partition_id"},
	{name: "webhook_events", column: "partition_id"},
	{name: "payment_confirmations", column: "partition_id"},
	{name: "outbox", column: "partition_id"},
}

// EventPlacementMoved is the outbox event type of a move.
const EventPlacementMoved = "placement.moved"

// Placements reads and moves the placement directory. Unlike Store it is
// not bound to a region: the directory is global and any region (or the
// operators' CLI) may move a partition.
type Placements struct {
	db *DB
}

// NewPlacements returns the placement store of db.
func NewPlacements(db *DB) *Placements { return &Placements{db: db} }

var _ placement.Source = (*Placements)(nil)

// ListPlacements returns placements ordered by kind and id, optionally
// filtered by kind and home region ("" = any).
func (p *Placements) ListPlacements(ctx context.Context, kind berth.Kind, region string) ([]placement.Placement, error) {
	rows, err := p.db.pool.Query(ctx,
		`SELECT kind, partition_id::TEXT, home_region, version, updated_at FROM placements
		 WHERE ($1 = '' OR kind = $1) AND ($2 = '' OR home_region = $2)
		 ORDER BY kind, partition_id`, string(kind), region)
	if err != nil {
		return nil, classify(fmt.Errorf("list placements: %w", err))
	}
	out, err := pgx.CollectRows(rows, scanPlacement)
	if err != nil {
		return nil, classify(fmt.Errorf("list placements: %w", err))
	}
	return out, nil
}

func scanPlacement(row pgx.CollectableRow) (placement.Placement, error) {
	var (
		pl   placement.Placement
		kind string
	)
	err := row.Scan(&kind, &pl.PartitionID, &pl.HomeRegion, &pl.Version, &pl.UpdatedAt)
	pl.Kind, pl.UpdatedAt = berth.Kind(kind), pl.UpdatedAt.UTC()
	return pl, err
}

// GetPlacement returns one placement; an unknown (or malformed) id is an
// error wrapping placement.ErrNotFound.
func (p *Placements) GetPlacement(ctx context.Context, kind berth.Kind, partitionID string) (placement.Placement, error) {
	if _, err := uuid.Parse(partitionID); err != nil {
		return placement.Placement{}, fmt.Errorf("%s %q: %w", kind, partitionID, placement.ErrNotFound)
	}
	rows, err := p.db.pool.Query(ctx, placementSQL, string(kind), partitionID)
	if err != nil {
		return placement.Placement{}, classify(fmt.Errorf("get placement: %w", err))
	}
	pl, err := pgx.CollectExactlyOneRow(rows, scanPlacement)
	if errors.Is(err, pgx.ErrNoRows) {
		return pl, fmt.Errorf("%s %s: %w", kind, partitionID, placement.ErrNotFound)
	}
	if err != nil {
		return pl, classify(fmt.Errorf("get placement: %w", err))
	}
	return pl, nil
}

// movedEvent is the data of a placement.moved event.
type movedEvent struct {
	Kind        berth.Kind `json:"kind"`
	PartitionID string     `json:"partition_id"`
	FromRegion  string     `json:"from_region"`
	ToRegion    string     `json:"to_region"`
	Version     int64      `json:"version"`
}

// MovePlacement re-homes a partition to region to in one transaction: it
// locks the placement row FOR UPDATE, bumps its version, sets home_region on
// every row of the partition in every partition table, and appends a
// placement.moved outbox event. A booking transaction that raced with it
// either committed before (its rows moved with the rest) or waited on the
// placement row — or, a hold, on its nights — and now refuses with 421
// misdirected.
func (p *Placements) MovePlacement(ctx context.Context, kind berth.Kind, partitionID, to string) (placement.MoveResult, error) {
	if !kind.Valid() {
		return placement.MoveResult{}, berth.Invalid(berth.FieldError{Field: "kind", Message: "want hotel or clinic"})
	}
	if !berth.ValidRegion(to) {
		return placement.MoveResult{}, berth.Invalid(berth.FieldError{Field: "to_region", Message: fmt.Sprintf("want one of %v", berth.Regions())})
	}
	if _, err := uuid.Parse(partitionID); err != nil {
		return placement.MoveResult{}, berth.Errorf(berth.CodeNotFound, "%s %s not found", kind, partitionID)
	}
	tables, err := p.tablesToMove(ctx, kind)
	if err != nil {
		return placement.MoveResult{}, err
	}
	var res placement.MoveResult
	err = p.db.InTx(ctx, func(tx pgx.Tx) error {
		res = placement.MoveResult{}
		rows, err := tx.Query(ctx,
			`SELECT kind, partition_id::TEXT, home_region, version, updated_at FROM placements
			 WHERE kind = $1 AND partition_id = $2 FOR UPDATE`, string(kind), partitionID)
		if err != nil {
			return fmt.Errorf("lock placement: %w", err)
		}
		cur, err := pgx.CollectExactlyOneRow(rows, scanPlacement)
		if errors.Is(err, pgx.ErrNoRows) {
			return berth.Errorf(berth.CodeNotFound, "%s %s not found", kind, partitionID)
		}
		if err != nil {
			return fmt.Errorf("lock placement: %w", err)
		}
		res.Placement, res.FromRegion = cur, cur.HomeRegion
		if cur.HomeRegion == to {
			return nil
		}
		b := &pgx.Batch{}
		b.Queue(`UPDATE placements SET home_region = $3, version = version + 1, updated_at = now()
			WHERE kind = $1 AND partition_id = $2 RETURNING version, updated_at`, string(kind), partitionID, to)
		for _, t := range tables {
			b.Queue(t.rehomeSQL(), to, partitionID)
		}
		ev := movedEvent{Kind: kind, PartitionID: partitionID, FromRegion: cur.HomeRegion, ToRegion: to, Version: cur.Version + 1}
		// The event is homed with the partition: the new home's relay publishes it.
		if err := queueEvents(ctx, b, to, event{kind: kind, partitionID: partitionID, typ: EventPlacementMoved,
			aggregateID: partitionID, version: ev.Version, data: ev}); err != nil {
			return err
		}
		br := tx.SendBatch(ctx, b)
		if err := br.QueryRow().Scan(&res.Version, &res.UpdatedAt); err != nil {
			br.Close()
			return fmt.Errorf("update placement: %w", err)
		}
		for _, t := range tables {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return fmt.Errorf("re-home %s: %w", t.name, err)
			}
			res.Rows += tag.RowsAffected()
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("placement.moved event: %w", err)
		}
		res.HomeRegion, res.UpdatedAt, res.Moved = to, res.UpdatedAt.UTC(), true
		return nil
	})
	if err != nil {
		return placement.MoveResult{}, classify(err)
	}
	return res, nil
}

// tablesToMove returns the partition tables of kind (then the shared ones)
// that exist in this database. A table listed before its migration landed is
// skipped; a table that exists but is not listed is caught by
// TestPartitionTablesCoverSchema.
func (p *Placements) tablesToMove(ctx context.Context, kind berth.Kind) ([]partitionTable, error) {
	existing, err := p.homedTables(ctx)
	if err != nil {
		return nil, err
	}
	var out []partitionTable
	for _, t := range append(slices.Clone(partitionTables[kind]), sharedPartitionTables...) {
		if slices.Contains(existing, t.name) {
			out = append(out, t)
		}
	}
	return out, nil
}

// homedTables lists the tables of the current schema with a home_region
// column, except the directory itself.
func (p *Placements) homedTables(ctx context.Context) ([]string, error) {
	rows, err := p.db.pool.Query(ctx,
		`SELECT table_name::TEXT FROM information_schema.columns
		 WHERE table_schema = current_schema() AND column_name = 'home_region' AND table_name <> 'placements'
		 ORDER BY 1`)
	if err != nil {
		return nil, classify(fmt.Errorf("list partition tables: %w", err))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify(fmt.Errorf("list partition tables: %w", err))
	}
	return names, nil
}
