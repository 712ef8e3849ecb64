package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/view"
	"github.com/jackc/pgx/v5"
)

// viewSource is a booking table the view is built from. Each source lists its rows as
// items in key order; adding a kind is adding a source.
type viewSource struct {
	kind  string
	table string
	// query selects items after (partition, id), ordered by them, $3 rows.
	query string
	scan  func(pgx.Rows) (view.Item, error)
}

var viewSources = []viewSource{
	{
		kind: "hotel", table: "reservations",
		query: `SELECT hotel_id::TEXT, reservation_id::TEXT, guest_id, status, check_in, check_out, quantity,
			COALESCE(contact_email, ''), COALESCE(contact_phone, ''), version, updated_at,
			COALESCE(relocated_from_reservation_id::TEXT, ''), COALESCE(contact_push_token, '')
			FROM reservations WHERE (hotel_id, reservation_id) > ($1::UUID, $2::UUID)
			ORDER BY hotel_id, reservation_id LIMIT $3`,
		scan: func(rows pgx.Rows) (view.Item, error) {
			var (
				pid, id, guest, status, email, phone, from, push string
				in, out, updated                                 time.Time
				qty                                              int32
				version                                          int64
			)
			if err := rows.Scan(&pid, &id, &guest, &status, &in, &out, &qty, &email, &phone, &version, &updated, &from, &push); err != nil {
				return view.Item{}, err
			}
			it, err := view.HotelItem(pid, id, guest, status, in.Format(time.DateOnly), out.Format(time.DateOnly), int(qty), email, phone, version, updated)
			it.ContactPushToken = push
			view.Relocated(&it, from)
			return it, err
		},
	},
	{
		kind: "clinic", table: "appointments",
		query: `SELECT clinic_id::TEXT, appointment_id::TEXT, guest_id, status, starts_at, ends_at,
			COALESCE(contact_email, ''), COALESCE(contact_phone, ''), version, updated_at, COALESCE(contact_push_token, '')
			FROM appointments WHERE (clinic_id, appointment_id) > ($1::UUID, $2::UUID)
			ORDER BY clinic_id, appointment_id LIMIT $3`,
		scan: func(rows pgx.Rows) (view.Item, error) {
			var (
				pid, id, guest, status, email, phone, push string
				starts, ends, updated                      time.Time
				version                                    int64
			)
			if err := rows.Scan(&pid, &id, &guest, &status, &starts, &ends, &email, &phone, &version, &updated, &push); err != nil {
				return view.Item{}, err
			}
			it := view.ClinicItem(pid, id, guest, status, starts, ends, email, phone, version, updated)
			it.ContactPushToken = push
			return it, nil
		},
	},
}

const zeroUUID = "00000000-0000-0000-0000-000000000000"

func (s *ReadModel) tableExists(ctx context.Context, table string) (bool, error) {
	var ok bool
	err := s.db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_name = $1)`, table).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look for table %s: %w", table, err)
	}
	return ok, nil
}

// scanSource calls fn with every item of a source, in pages.
func (s *ReadModel) scanSource(ctx context.Context, src viewSource, fn func([]view.Item) error) error {
	afterP, afterID := zeroUUID, zeroUUID
	for {
		rows, err := s.db.pool.Query(ctx, src.query, afterP, afterID, 1000)
		if err != nil {
			return fmt.Errorf("read %s: %w", src.table, err)
		}
		var page []view.Item
		for rows.Next() {
			it, err := src.scan(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("read %s: %w", src.table, err)
			}
			it.EventTime = it.UpdatedAt
			page = append(page, it)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read %s: %w", src.table, err)
		}
		if len(page) == 0 {
			return nil
		}
		if err := fn(page); err != nil {
			return err
		}
		afterP, afterID = page[len(page)-1].PartitionID, page[len(page)-1].ID
	}
}

// Rebuild rebuilds the view from the booking tables: every reservation (and
// appointment, when that table exists) is written unless the view already
// holds a newer version (so it is safe while the projection runs), and view
// rows with no booking row are removed.
func (s *ReadModel) Rebuild(ctx context.Context) (view.RebuildReport, error) {
	rep := view.RebuildReport{Written: map[string]int{}}
	for _, src := range viewSources {
		ok, err := s.tableExists(ctx, src.table)
		if err != nil {
			return rep, err
		}
		if !ok {
			continue
		}
		err = s.scanSource(ctx, src, func(page []view.Item) error {
			b := &pgx.Batch{}
			for _, it := range page {
				b.Queue(strings.Replace(upsertSQL, "rm_reservations.version < excluded.version",
					"rm_reservations.version <= excluded.version", 1), upsertArgs(it)...)
			}
			if err := s.db.pool.SendBatch(ctx, b).Close(); err != nil {
				return fmt.Errorf("rebuild %s: %w", src.kind, err)
			}
			rep.Written[src.kind] += len(page)
			return nil
		})
		if err != nil {
			return rep, err
		}
		keyCols := map[string][2]string{"reservations": {"hotel_id", "reservation_id"}, "appointments": {"clinic_id", "appointment_id"}}[src.table]
		tag, err := s.db.pool.Exec(ctx, fmt.Sprintf(`DELETE FROM rm_reservations AS rm WHERE rm.kind = $1 AND NOT EXISTS (
			SELECT 1 FROM %s AS b WHERE b.%s::TEXT = rm.partition_id AND b.%s::TEXT = rm.id)`, src.table, keyCols[0], keyCols[1]), src.kind)
		if err != nil {
			return rep, fmt.Errorf("rebuild %s: remove orphans: %w", src.kind, err)
		}
		rep.Removed += int(tag.RowsAffected())
	}
	return rep, nil
}

// Verify compares the view with the booking tables and lists differences
// (compared: guest, status, version, start, end).
func (s *ReadModel) Verify(ctx context.Context) ([]view.Difference, error) {
	var diffs []view.Difference
	seen := map[[3]string]bool{}
	for _, src := range viewSources {
		ok, err := s.tableExists(ctx, src.table)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		err = s.scanSource(ctx, src, func(page []view.Item) error {
			rows, err := s.viewRows(ctx, src.kind, page)
			if err != nil {
				return err
			}
			for _, want := range page {
				k := [3]string{want.Kind, want.PartitionID, want.ID}
				seen[k] = true
				got, ok := rows[k]
				if !ok {
					diffs = append(diffs, view.Difference{Kind: want.Kind, PartitionID: want.PartitionID, ID: want.ID, Problem: "missing_in_view", Detail: "db status " + want.Status})
					continue
				}
				if d := view.Compare(want, got); d != "" {
					diffs = append(diffs, view.Difference{Kind: want.Kind, PartitionID: want.PartitionID, ID: want.ID, Problem: "mismatch", Detail: d})
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// View rows with no booking row.
	rows, err := s.db.pool.Query(ctx, `SELECT kind, partition_id, id FROM rm_reservations`)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k [3]string
		if err := rows.Scan(&k[0], &k[1], &k[2]); err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		if !seen[k] {
			diffs = append(diffs, view.Difference{Kind: k[0], PartitionID: k[1], ID: k[2], Problem: "extra_in_view", Detail: "no booking row"})
		}
	}
	return diffs, rows.Err()
}

func (s *ReadModel) viewRows(ctx context.Context, kind string, page []view.Item) (map[[3]string]view.Item, error) {
	pids := make([]string, len(page))
	ids := make([]string, len(page))
	for i, it := range page {
		pids[i], ids[i] = it.PartitionID, it.ID
	}
	rows, err := s.db.pool.Query(ctx, `SELECT rm.partition_id, rm.id, rm.guest_id, rm.status, rm.version, rm.start_at, rm.end_at
		FROM rm_reservations AS rm JOIN unnest($2::TEXT[], $3::TEXT[]) AS k(p, i) ON rm.partition_id = k.p AND rm.id = k.i
		WHERE rm.kind = $1`, kind, pids, ids)
	if err != nil {
		return nil, fmt.Errorf("verify: read view: %w", err)
	}
	defer rows.Close()
	out := map[[3]string]view.Item{}
	for rows.Next() {
		it := view.Item{Kind: kind}
		if err := rows.Scan(&it.PartitionID, &it.ID, &it.GuestID, &it.Status, &it.Version, &it.Start, &it.End); err != nil {
			return nil, fmt.Errorf("verify: read view: %w", err)
		}
		out[[3]string{kind, it.PartitionID, it.ID}] = it
	}
	return out, rows.Err()
}
