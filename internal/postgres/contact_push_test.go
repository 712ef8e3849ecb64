package postgres_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// Every hold keeps its own guest's push token, alone or decided in a batch
// with others (the batch writes every winner's row in one INSERT): the
// reservation row and its reservation.held event carry it, and a hold
// without one stores NULL.
func TestHoldsKeepTheirPushTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	const holds = 200
	h := env.SeedHotel("", holds, 0, bookingtest.Date(1), bookingtest.Date(30))
	store := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
	store.SetHoldBatch(64)
	token := func(i int) string {
		if i%5 == 0 {
			return "" // some guests give none
		}
		return fmt.Sprintf("fcm:guest-%d_token", i)
	}
	answers := make([]answer, holds)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := holdOf(t, h, fmt.Sprintf("p%d", i), 5, 2, 1)
			req.ContactPushToken = token(i)
			<-start
			answers[i] = doHold(store, req, uuid.NewString(), "hash")
		}()
	}
	close(start)
	wg.Wait()
	if stats := store.HoldBatchStats(); stats.Batches == 0 {
		t.Fatalf("%d racing holds of one room type formed no batch: %+v", holds, stats)
	}
	for i, a := range answers {
		if a.err != nil || a.status != http.StatusCreated {
			t.Fatalf("hold %d: %d %s %v", i, a.status, a.body, a.err)
		}
	}
	rows, err := dbtest.SQL(env.DB).Query(ctx, `SELECT r.guest_id, r.contact_push_token, o.payload->>'contact_push_token'
		FROM reservations r JOIN outbox o ON o.partition_id = r.hotel_id AND o.aggregate_id = r.reservation_id
		     AND o.event_type = 'reservation.held'
		WHERE r.hotel_id = $1`, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var guest string
		var stored, inEvent *string
		if err := rows.Scan(&guest, &stored, &inEvent); err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(guest, "p%d", &i); err != nil {
			t.Fatal(err)
		}
		want := token(i)
		if got := deref(stored); got != want || (want == "") != (stored == nil) || deref(inEvent) != want {
			t.Errorf("guest %s: stored %v, in the event %v; want %q", guest, stored, inEvent, want)
		}
		seen++
	}
	if err := rows.Err(); err != nil || seen != holds {
		t.Fatalf("%d reservations with their held events (%v), want %d", seen, err, holds)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The view rebuilt from the booking tables keeps a stay's push token, and
// the reminder scan hands it to the notifier: a stay beginning tomorrow is
// reminded on every channel it has a contact for, push included.
func TestRebuiltViewKeepsAStaysPushToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	h := env.SeedHotel("", 3, 0, bookingtest.Date(0), bookingtest.Date(10))
	store := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
	req := holdOf(t, h, "ann", 1, 2, 1)
	req.ContactPushToken = "fcm:ann-device_7"
	if a := doHold(store, req, uuid.NewString(), "hash"); a.err != nil || a.status != http.StatusCreated {
		t.Fatalf("hold: %d %s %v", a.status, a.body, a.err)
	}
	if _, err := dbtest.SQL(env.DB).Exec(ctx, `UPDATE reservations SET status = 'confirmed' WHERE reservation_id = $1`, req.ReservationID); err != nil {
		t.Fatal(err)
	}
	rm := postgres.NewReadModel(env.DB)
	if _, err := rm.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	due, err := postgres.NewNotifications(env.DB).DueReminders(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].ID != req.ReservationID || due[0].ContactPushToken != req.ContactPushToken {
		t.Fatalf("reminders due: %+v", due)
	}
}
