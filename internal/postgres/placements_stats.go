package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/placement"
	"github.com/jackc/pgx/v5"
)

// RegionStats is what `router shards list` shows per region.
type RegionStats struct {
	Region       string               `json:"region"`
	Partitions   map[berth.Kind]int64 `json:"partitions"`
	Reservations int64                `json:"reservations"`
	Appointments int64                `json:"appointments"`
	// Writes5m and Writes15m count outbox rows (one per state change)
	// created in the last 5 and 15 minutes: the region's recent write load.
	Writes5m  int64 `json:"writes_5m"`
	Writes15m int64 `json:"writes_15m"`
}

// RegionStats returns one entry per region of regions (in that order) plus
// any other region the database names.
func (p *Placements) RegionStats(ctx context.Context, regions []string) ([]RegionStats, error) {
	by := map[string]*RegionStats{}
	get := func(r string) *RegionStats {
		if by[r] == nil {
			by[r] = &RegionStats{Region: r, Partitions: map[berth.Kind]int64{berth.KindHotel: 0, berth.KindClinic: 0}}
		}
		return by[r]
	}
	for _, r := range regions {
		get(r)
	}
	scan := func(query string, f func(region string, kind string, n, m int64)) error {
		rows, err := p.db.pool.Query(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				region, kind string
				n, m         int64
			)
			if err := rows.Scan(&region, &kind, &n, &m); err != nil {
				return err
			}
			f(region, kind, n, m)
		}
		return rows.Err()
	}
	if err := scan(`SELECT home_region, kind, count(*), 0::INT8 FROM placements GROUP BY 1, 2`,
		func(r, k string, n, _ int64) { get(r).Partitions[berth.Kind(k)] = n }); err != nil {
		return nil, classify(fmt.Errorf("count partitions: %w", err))
	}
	tables, err := p.homedTables(ctx)
	if err != nil {
		return nil, err
	}
	if slices.Contains(tables, "reservations") {
		if err := scan(`SELECT home_region, '', count(*), 0::INT8 FROM reservations GROUP BY 1`,
			func(r, _ string, n, _ int64) { get(r).Reservations = n }); err != nil {
			return nil, classify(fmt.Errorf("count reservations: %w", err))
		}
	}
	if slices.Contains(tables, "appointments") {
		if err := scan(`SELECT home_region, '', count(*), 0::INT8 FROM appointments GROUP BY 1`,
			func(r, _ string, n, _ int64) { get(r).Appointments = n }); err != nil {
			return nil, classify(fmt.Errorf("count appointments: %w", err))
		}
	}
	if err := scan(`SELECT home_region, '',
			count(*) FILTER (WHERE created_at > now() - INTERVAL '5 minutes'), count(*)
		FROM outbox WHERE created_at > now() - INTERVAL '15 minutes' GROUP BY 1`,
		func(r, _ string, n5, n15 int64) { s := get(r); s.Writes5m, s.Writes15m = n5, n15 }); err != nil {
		return nil, classify(fmt.Errorf("count recent writes: %w", err))
	}
	out := make([]RegionStats, 0, len(by))
	for _, r := range regions {
		out = append(out, *by[r])
		delete(by, r)
	}
	for _, s := range by { // regions outside the known list, if any
		out = append(out, *s)
	}
	slices.SortStableFunc(out[len(regions):], func(a, b RegionStats) int { return strings.Compare(a.Region, b.Region) })
	return out, nil
}

// PartitionLoads returns every partition with its recent write load as a
// planning item: Weight is the number of outbox rows (state changes) it
// produced within window, or 1 for every partition when window is 0
// (balancing by count).
func (p *Placements) PartitionLoads(ctx context.Context, window time.Duration) ([]placement.Item, error) {
	var (
		rows pgx.Rows
		err  error
	)
	if window <= 0 {
		rows, err = p.db.pool.Query(ctx,
			`SELECT kind, partition_id::TEXT, home_region, 1::INT8 FROM placements ORDER BY kind, partition_id`)
	} else {
		rows, err = p.db.pool.Query(ctx,
			`SELECT pl.kind, pl.partition_id::TEXT, pl.home_region, COALESCE(o.n, 0)::INT8
			 FROM placements pl LEFT JOIN (
			   SELECT partition_id, count(*) AS n FROM outbox
			   WHERE created_at > now() - ($1::INT8 * INTERVAL '1 second') GROUP BY partition_id
			 ) o ON o.partition_id = pl.partition_id
			 ORDER BY pl.kind, pl.partition_id`, int64(window/time.Second))
	}
	if err != nil {
		return nil, classify(fmt.Errorf("partition loads: %w", err))
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (placement.Item, error) {
		var (
			it   placement.Item
			kind string
		)
		err := row.Scan(&kind, &it.PartitionID, &it.Region, &it.Weight)
		it.Kind = berth.Kind(kind)
		return it, err
	})
	if err != nil {
		return nil, classify(fmt.Errorf("partition loads: %w", err))
	}
	return items, nil
}
