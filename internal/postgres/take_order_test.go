package postgres_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/jackc/pgx/v5"
)

// A hold locks its nights in date order whatever the plan scans (ADR 0003,
// step 4). Here the nights' latest versions lie in the heap in reverse date
// order and the table is small, so the planner scans the heap. A
// transaction locks the middle night, as a cancel releasing nights in date
// order does, while a hold of the whole stay waits for it; then it locks
// the last night. A take in date order has not reached the last night and
// the lock is granted at once. A take in heap order holds it already: the
// lock waits (the deadlock a cancel and a hold ran into) and times out.
func TestTakesLockNightsInDateOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	h := env.SeedHotel("", 10, 0, bookingtest.Date(1), bookingtest.Date(6))
	db := dbtest.SQL(env.DB)
	nights := make([]string, 0, 5)
	for d := 1; d <= 5; d++ {
		nights = append(nights, bookingtest.Date(d))
	}
	// Each update writes the night's new version after the others on the
	// page: the last night first, the first night last.
	for _, night := range slices.Backward(nights) {
		if _, err := db.Exec(ctx, `UPDATE room_inventory SET version = version + 1
			WHERE hotel_id = $1 AND room_type_id = $2 AND night = $3::DATE`, h.ID, h.RoomTypeID, night); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `ANALYZE room_inventory`); err != nil {
		t.Fatal(err)
	}
	var heap []string
	if err := db.QueryRow(ctx, `SELECT array_agg(night::TEXT ORDER BY ctid) FROM room_inventory
		WHERE hotel_id = $1 AND room_type_id = $2`, h.ID, h.RoomTypeID).Scan(&heap); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(nights)
	slices.Reverse(want)
	if !slices.Equal(heap, want) {
		t.Fatalf("the nights lie in the heap as %v, want them in reverse date order", heap)
	}

	lockNight := func(tx pgx.Tx, night string) error {
		var got string
		return tx.QueryRow(ctx, `SELECT night::TEXT FROM room_inventory
			WHERE hotel_id = $1 AND room_type_id = $2 AND night = $3::DATE FOR UPDATE`, h.ID, h.RoomTypeID, night).Scan(&got)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := lockNight(tx, nights[2]); err != nil {
		t.Fatal(err)
	}
	held := make(chan bookingtest.Response, 1)
	go func() {
		held <- env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
			Token: env.Token("g1", berth.RoleGuest), IdemKey: bookingtest.NewKey(),
			Body: map[string]any{"guest_id": "g1", "room_type_id": h.RoomTypeID, "check_in": nights[0], "check_out": bookingtest.Date(6), "quantity": 1}})
	}()
	// Until the hold waits for the middle night (the only lock anyone in
	// this database can wait for).
	for deadline := time.Now().Add(30 * time.Second); ; {
		waiting, err := dbtest.LockWaiters(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hold neither answered nor waited for the locked night")
		}
		select {
		case r := <-held:
			t.Fatalf("the hold did not wait for the locked night: %d %s", r.Status, r.Body)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '500ms'`); err != nil {
		t.Fatal(err)
	}
	if err := lockNight(tx, nights[4]); err != nil {
		t.Fatalf("the last night is held by the hold that waits for the middle one — it locked out of date order: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-held; r.Status != http.StatusCreated {
		t.Fatalf("hold after the locks went: %d %s", r.Status, r.Body)
	}
}
