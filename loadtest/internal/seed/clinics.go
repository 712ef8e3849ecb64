package seed

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Clinics writes clinics with doctors and SlotDays days of 24 open slots
// per doctor (20 minutes from 08:00 UTC), when the clinic tables exist.
func Clinics(ctx context.Context, pool *pgxpool.Pool, o Options) (Result, error) {
	res := Result{Rows: map[string]int64{}}
	var ok bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('slots') IS NOT NULL AND to_regclass('doctors') IS NOT NULL`).Scan(&ok); err != nil || !ok {
		return res, fmt.Errorf("clinic tables do not exist yet (schema/00100_clinics.sql …): %v", err)
	}
	if len(o.Regions) == 0 {
		o.Regions = []string{"us-east", "eu-west", "ap-south"}
	}
	start := time.Now()
	first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	for i := range o.Clinics {
		id, region := uuid.NewString(), o.Regions[i%len(o.Regions)]
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO placements (kind, partition_id, home_region) VALUES ('clinic', $1, $2)`, id, region); err != nil {
				return fmt.Errorf("placement: %w", err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO clinics (clinic_id, home_region, name, timezone) VALUES ($1, $2, $3, 'UTC')`,
				id, region, fmt.Sprintf("Seed Clinic %d", i)); err != nil {
				return fmt.Errorf("clinic: %w", err)
			}
			var docs, slots [][]any
			for d := range o.Doctors {
				did := uuid.NewString()
				docs = append(docs, []any{id, did, region, fmt.Sprintf("Dr %d-%d", i, d), int32(20), false,
					`[{"weekday":1,"start":"08:00","end":"16:00"},{"weekday":2,"start":"08:00","end":"16:00"},{"weekday":3,"start":"08:00","end":"16:00"},{"weekday":4,"start":"08:00","end":"16:00"},{"weekday":5,"start":"08:00","end":"16:00"},{"weekday":6,"start":"08:00","end":"16:00"},{"weekday":7,"start":"08:00","end":"16:00"}]`,
					first.AddDate(0, 0, o.SlotDays)})
				for day := range o.SlotDays {
					date := first.AddDate(0, 0, day)
					for s := range 24 {
						at := date.Add(8*time.Hour + time.Duration(s)*20*time.Minute)
						slots = append(slots, []any{id, uuid.NewString(), region, did, at, at.Add(20 * time.Minute), date, "open"})
					}
				}
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"doctors"}, []string{"clinic_id", "doctor_id", "home_region", "name", "slot_minutes",
				"prepay_required", "weekly", "materialized_through"}, pgx.CopyFromRows(docs)); err != nil {
				return fmt.Errorf("copy doctors: %w", err)
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"slots"}, []string{"clinic_id", "slot_id", "home_region", "doctor_id", "starts_at",
				"ends_at", "local_date", "status"}, pgx.CopyFromRows(slots)); err != nil {
				return fmt.Errorf("copy slots: %w", err)
			}
			res.Rows["doctors"] += int64(len(docs))
			res.Rows["slots"] += int64(len(slots))
			return nil
		})
		if err != nil {
			return res, err
		}
		res.Rows["clinics"]++
	}
	res.Elapsed = time.Since(start)
	res.Seconds = res.Elapsed.Seconds()
	return res, nil
}
