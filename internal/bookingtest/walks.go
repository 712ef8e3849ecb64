package bookingtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/walk"
)

// PumpWalks plays relay and consumer for the relocation saga in-process:
// it hands every walk.* event of the outbox not yet sent to the saga's
// handler (internal/walk) in outbox order, marks it sent, and repeats until
// the saga has nothing left to say. It returns how many events it handled.
// The steps it runs are the store's real transactions; only the broker is
// left out (tests of the broker path start NATS and the real relay).
func PumpWalks(ctx context.Context, db *postgres.DB, store walk.Store) (int, error) {
	saga := walk.New(store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	pool := dbtest.SQL(db)
	handled := 0
	for round := 0; round < 100; round++ {
		rows, err := pool.Query(ctx, `SELECT partition_id::TEXT, event_id::TEXT, home_region, kind, event_type, aggregate_id::TEXT,
				aggregate_version, seq, payload, created_at
			FROM outbox WHERE event_type LIKE 'walk.%' AND sent_at IS NULL ORDER BY created_at, seq`)
		if err != nil {
			return handled, fmt.Errorf("read walk events: %w", err)
		}
		var recs []events.Record
		for rows.Next() {
			var r events.Record
			if err := rows.Scan(&r.PartitionID, &r.EventID, &r.HomeRegion, &r.Kind, &r.Type, &r.AggregateID,
				&r.AggregateVersion, &r.Seq, &r.Payload, &r.CreatedAt); err != nil {
				rows.Close()
				return handled, fmt.Errorf("read walk events: %w", err)
			}
			recs = append(recs, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return handled, fmt.Errorf("read walk events: %w", err)
		}
		if len(recs) == 0 {
			return handled, nil
		}
		for _, r := range recs {
			if err := saga.Handle(ctx, natsbus.Message{Subject: events.Subject(r.Kind, r.PartitionID, r.Type), Event: events.FromRecord(r)}); err != nil {
				return handled, fmt.Errorf("walk event %s %s: %w", r.Type, r.EventID, err)
			}
			handled++
			if _, err := pool.Exec(ctx, `UPDATE outbox SET sent_at = now() WHERE partition_id = $1 AND event_id = $2`,
				r.PartitionID, r.EventID); err != nil {
				return handled, fmt.Errorf("mark walk event: %w", err)
			}
		}
	}
	return handled, fmt.Errorf("the walk saga did not settle in 100 rounds")
}
