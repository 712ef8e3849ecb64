package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
)

// BenchmarkFirstHoldOfAPool is a service's first prepaid hold (the hold and
// its payment intent) on a pool just opened — what a fresh platform's
// flash sale waits for — cold, after the pool's warm-up (DB.Warm), and,
// for the floor, a second hold on a pool that made one already.
// Besides the time, it reports the CPU its database backends spent on it
// (backend-us/op; from /proc, so only with the server on this machine).
//
//	go test -run '^$' -bench FirstHoldOfAPool -benchtime 30x ./internal/postgres/
func BenchmarkFirstHoldOfAPool(b *testing.B) {
	env := bookingtest.Start(b, bookingtest.Options{})
	// Rooms enough for any -benchtime (make bench runs 3 s).
	h := env.SeedHotel("", 100_000, 0, bookingtest.Date(1), bookingtest.Date(5))
	in, _ := reservation.ParseDate(bookingtest.Date(2))
	stay := reservation.Stay{CheckIn: in, CheckOut: in.AddDays(2)}
	ctx := context.Background()
	hold := func(s *postgres.Store, pay *postgres.DevPaymentProvider) {
		resp, err := s.Hold(ctx, reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID,
			GuestID: "g-" + uuid.NewString(), Stay: stay, Quantity: 1}, &berth.Idem{Key: uuid.NewString(), Hash: "h", Render: renderAnswer})
		if err != nil || resp.Status != 201 {
			b.Fatalf("hold: %d %v", resp.Status, err)
		}
		if _, err := pay.CreateIntent(ctx, payments.IntentRequest{Kind: "hotel", PartitionID: h.ID, ReservationID: string(resp.Body),
			AmountCents: 100, Currency: "EUR", IdempotencyKey: uuid.NewString()}); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []string{"cold", "warmed", "second"} {
		warm := mode == "warmed"
		b.Run(mode, func(b *testing.B) {
			var backendNs int64
			for i := range b.N {
				b.StopTimer()
				app := fmt.Sprintf("first-hold-%d-%s", i, uuid.NewString()[:8])
				opts := postgres.Options{MaxConns: 4}
				if warm {
					opts.Warm = warmed()
				}
				db, err := postgres.Open(ctx, env.DBURL+"&application_name="+app, opts)
				if err != nil {
					b.Fatal(err)
				}
				if warm {
					if _, err := db.Warm(ctx, 1); err != nil {
						b.Fatal(err)
					}
				}
				s := postgres.NewStore(db, "us-east", 10*time.Minute)
				pay := bookingtest.NewDevPayments(b, db)
				if mode == "second" {
					hold(s, pay)
				}
				before := backendsCPU(b, env.DB, app)
				b.StartTimer()
				hold(s, pay)
				b.StopTimer()
				after := backendsCPU(b, env.DB, app)
				for pid, ns := range after {
					backendNs += ns - before[pid]
				}
				db.Close()
			}
			b.ReportMetric(float64(backendNs)/1e3/float64(b.N), "backend-us/op")
		})
	}
}

// backendsCPU is the CPU time (ns) of every backend whose sessions carry
// application name app, by pid (empty when /proc does not show them).
func backendsCPU(b *testing.B, db *postgres.DB, app string) map[int]int64 {
	rows, err := dbtest.SQL(db).Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	cpu := map[int]int64{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat"); err == nil {
			if ns, err := strconv.ParseInt(strings.Fields(string(stat))[0], 10, 64); err == nil {
				cpu[pid] = ns
			}
		}
	}
	return cpu
}
