package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The hold path through HTTP (JSON, JWT, idempotency, fence, outbox) against
// the same transaction issued as raw SQL on the same database, in one run:
// on spread inventory (random nights of many hotels) and on one hot
// room-night. `make bench` runs them; compare ns/op of the pairs.
func BenchmarkHold(b *testing.B) {
	env := bookingtest.Start(b, bookingtest.Options{DB: postgres.Options{MaxConns: 16}})
	const hotels = 20
	spread := make([]bookingtest.Hotel, hotels)
	for i := range spread {
		spread[i] = env.SeedHotel("", 100_000, 0, bookingtest.Date(1), bookingtest.Date(300))
	}
	hot := env.SeedHotel("", 100_000, 0, bookingtest.Date(1), bookingtest.Date(10))
	admin := env.Admin()
	for _, mode := range []struct {
		name string
		hot  bool
	}{{"spread", false}, {"hot", true}} {
		choose := func(r *rand.Rand) (bookingtest.Hotel, string, string) {
			if mode.hot {
				return hot, bookingtest.Date(5), bookingtest.Date(6)
			}
			d := 2 + r.IntN(290)
			return spread[r.IntN(hotels)], bookingtest.Date(d), bookingtest.Date(d + 1)
		}
		b.Run("http/"+mode.name, func(b *testing.B) {
			var failures atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(rand.Uint64(), 1))
				for pb.Next() {
					h, in, out := choose(r)
					resp, err := env.Try(context.Background(), bookingtest.Request{Method: "POST",
						Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: uuid.NewString(),
						Body: map[string]any{"guest_id": "bench", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}})
					if err != nil || resp.Status != http.StatusCreated {
						failures.Add(1)
					}
				}
			})
			if n := failures.Load(); n > 0 {
				b.Fatalf("%d holds failed", n)
			}
		})
		b.Run("sql/"+mode.name, func(b *testing.B) {
			var failures atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(rand.Uint64(), 2))
				for pb.Next() {
					h, in, out := choose(r)
					if err := rawHold(context.Background(), env.DB, h, in, out); err != nil {
						failures.Add(1)
					}
				}
			})
			if n := failures.Load(); n > 0 {
				b.Fatalf("%d raw holds failed", n)
			}
		})
	}
}

// rawHold is the hold transaction as plain SQL: the same statements the
// store issues (fence, idempotency key, room type, conditional take of the
// nights, reservation + outbox + stored response), without HTTP, JSON
// decoding, JWT or the retry helper.
func rawHold(ctx context.Context, db *postgres.DB, h bookingtest.Hotel, in, out string) error {
	tx, err := db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	key, resID := uuid.NewString(), uuid.NewString()
	pre := &pgx.Batch{}
	pre.Queue(`SELECT home_region FROM placements WHERE kind = 'hotel' AND partition_id = $1 FOR SHARE`, h.ID)
	pre.Queue(`INSERT INTO idempotency_keys (partition_id, idem_key, home_region, request_hash)
		VALUES ($1, $2, 'us-east', 'h') ON CONFLICT (partition_id, idem_key) DO NOTHING`, h.ID, key)
	br := tx.SendBatch(ctx, pre)
	var home string
	if err := br.QueryRow().Scan(&home); err != nil {
		br.Close()
		return err
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	var price int64
	var currency string
	rows, err := tx.Query(ctx, `
		WITH locked AS (SELECT night FROM room_inventory WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $3::DATE AND night < $4::DATE ORDER BY night FOR UPDATE)
		UPDATE room_inventory AS i SET reserved = i.reserved + 1 FROM locked
		WHERE i.hotel_id = $1 AND i.room_type_id = $2 AND i.night = locked.night AND i.reserved + 1 <= i.sell_limit
		RETURNING i.night, now() + INTERVAL '10 minutes',
		  (SELECT price_cents FROM room_types WHERE hotel_id = $1 AND room_type_id = $2),
		  (SELECT currency FROM room_types WHERE hotel_id = $1 AND room_type_id = $2)`, h.ID, h.RoomTypeID, in, out)
	if err != nil {
		return err
	}
	var expires time.Time
	n := 0
	for rows.Next() {
		var night time.Time
		if err := rows.Scan(&night, &expires, &price, &currency); err != nil {
			return err
		}
		n++
	}
	rows.Close()
	if n != 1 {
		return fmt.Errorf("took %d nights", n)
	}
	batch := &pgx.Batch{}
	batch.Queue(`INSERT INTO reservations (hotel_id, reservation_id, home_region, room_type_id, guest_id, check_in, check_out,
		quantity, status, hold_expires_at, total_price_cents, currency) VALUES ($1, $2, $3, $4, 'bench', $5::DATE, $6::DATE, 1, 'held', $7, $8, $9)`,
		h.ID, resID, home, h.RoomTypeID, in, out, expires, price, currency)
	batch.Queue(`INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type, aggregate_id, aggregate_version, seq, payload)
		VALUES ($1, $2, $3, 'hotel', 'reservation.held', $4, 1, 0, '{}')`, h.ID, uuid.NewString(), home, resID)
	batch.Queue(`UPDATE idempotency_keys SET response_status = 201, response_body = $3 WHERE partition_id = $1 AND idem_key = $2`,
		h.ID, key, []byte(`{}`))
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
