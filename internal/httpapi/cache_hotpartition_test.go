package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// A hot partition fails fast: while another transaction holds the night's
// row lock, holds give up after lock_timeout with 503 unavailable and a
// Retry-After instead of queueing on the pool; reads of the partition keep
// answering meanwhile, and holds succeed again once the lock is gone.
func TestHotPartitionLockWaitIs503(t *testing.T) {
	t.Parallel()
	env, _, _ := startCached(t, rediscacheDefaults(), bookingtest.Options{DB: postgres.Options{
		LockTimeout: 100 * time.Millisecond, StatementTimeout: 5 * time.Second, MaxConns: 8}})
	h := env.SeedHotel("", 100, 0, bookingtest.Date(1), bookingtest.Date(30))
	in, out := bookingtest.Date(3), bookingtest.Date(4)
	ctx := context.Background()

	// The side connection: a transaction that sits on the night's row.
	side, err := dbtest.SQL(env.DB).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Rollback(ctx)
	if _, err := side.Exec(ctx, `SELECT reserved FROM room_inventory WHERE hotel_id = $1 AND room_type_id = $2 AND night = $3 FOR UPDATE`,
		h.ID, h.RoomTypeID, in); err != nil {
		t.Fatal(err)
	}

	const holds = 16 // twice the pool
	var wg sync.WaitGroup
	results := make(chan bookingtest.Response, holds)
	admin := env.Admin()
	for range holds {
		wg.Go(func() {
			r, err := env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin,
				IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g1", "room_type_id": h.RoomTypeID,
					"check_in": in, "check_out": out, "quantity": 1}})
			if err != nil {
				t.Error(err)
				return
			}
			results <- r
		})
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.Status != http.StatusServiceUnavailable || r.Code() != "unavailable" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("hold on a locked night: %d %s Retry-After=%q", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}
	// Reads are not blocked by the row lock (MVCC) and the pool is not exhausted.
	if n, _, err := available(ctx, env, h, in, out); err != nil || n != 100 {
		t.Fatalf("read during the lock: %d %v", n, err)
	}
	if err := side.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	hold(t, env, h, in, out)
	var reserved int
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT reserved FROM room_inventory WHERE hotel_id = $1 AND night = $2`, h.ID, in).Scan(&reserved); err != nil || reserved != 1 {
		t.Fatalf("reserved = %d (%v), want 1: a 503 hold took a room", reserved, err)
	}
}
