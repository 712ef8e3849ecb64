package httpapi_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
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
					// A guest of their own per hold, as in a sale: one guest
					// would queue on their guest_holds row and hit the limit.
					resp, err := env.Try(context.Background(), bookingtest.Request{Method: "POST",
						Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: uuid.NewString(),
						Body: map[string]any{"guest_id": "bench-" + uuid.NewString(), "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}})
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

// rawHold is the store's hold transaction as plain SQL: postgres.HoldScript,
// the very statements Store.Hold sends in its round trips, without HTTP, JSON
// decoding, JWT, the retry helper or the outcome handling around them.
func rawHold(ctx context.Context, db *postgres.DB, h bookingtest.Hotel, in, out string) error {
	ci, err := reservation.ParseDate(in)
	if err != nil {
		return err
	}
	co, err := reservation.ParseDate(out)
	if err != nil {
		return err
	}
	req := reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID, GuestID: "bench-" + uuid.NewString(),
		Stay: reservation.Stay{CheckIn: ci, CheckOut: co}, Quantity: 1}
	script, vars := postgres.HoldScript(req, "us-east", 10*time.Minute, uuid.NewString(), "h")
	return db.RunScript(ctx, script, vars)
}
