package postgres_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
)

// BenchmarkStoreHold is Store.Hold alone, batching off (a transaction per
// hold), 16 winning holds at a time, each with a key and a guest of its
// own, on spread nights (3-night stays at random dates of 8 hotels) — the
// in-process leg of `make txcost` on a smaller database. The requests are
// made before the clock starts.
// Besides time and allocations it reports client-us/op: this process's
// CPU (user and system, the garbage collector included) per hold, the
// Go side's share of a hold's CPU that the leg's "client" column measures;
// the database's share runs in other processes and is not in it.
//
//	go test -run '^$' -bench StoreHold -benchmem -benchtime 3000x ./internal/postgres/
func BenchmarkStoreHold(b *testing.B) {
	env := bookingtest.Start(b, bookingtest.Options{})
	env.Store.SetHoldBatch(0) // one transaction per hold, as the leg
	hotels := make([]bookingtest.Hotel, 8)
	for i := range hotels {
		hotels[i] = env.SeedHotel("", 100_000, 0, bookingtest.Date(1), bookingtest.Date(300))
	}
	first, _ := reservation.ParseDate(bookingtest.Date(2))
	r := rand.New(rand.NewPCG(1, 2))
	type hold struct {
		req  reservation.HoldRequest
		idem *berth.Idem
	}
	holds := make([]hold, b.N)
	for i := range holds {
		h, in := hotels[r.IntN(len(hotels))], first.AddDays(r.IntN(290))
		holds[i] = hold{reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID,
			GuestID: "g-" + uuid.NewString(), Stay: reservation.Stay{CheckIn: in, CheckOut: in.AddDays(3)}, Quantity: 1},
			&berth.Idem{Key: uuid.NewString(), Hash: "h", Render: renderAnswer}}
	}
	ctx := context.Background()
	var next, failed atomic.Int64
	cpu := processCPU()
	b.ReportAllocs()
	b.SetParallelism(8) // 16 holds at a time on 2 cores, as the leg's 16 workers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h := holds[next.Add(1)-1]
			if resp, err := env.Store.Hold(ctx, h.req, h.idem); err != nil || resp.Status != 201 {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d holds failed", n, b.N)
	}
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "client-us/op")
}

// processCPU is the CPU this process has used so far, user and system.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
