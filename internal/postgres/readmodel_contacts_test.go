package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/view"
)

// Every contact an event carries reaches the view and the reminder scan:
// e-mail, phone and an appointment's push token, through the one-statement
// apply of the projection; a later event without them keeps them.
func TestViewKeepsEveryContactForReminders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	rm, queue := postgres.NewReadModel(db), postgres.NewNotifications(db)
	start := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	it := view.ClinicItem("0b6f2c44-5a1e-4f0e-8b7a-2c3d4e5f6a7b", "5a3c6c8e-1d4f-4c55-9a3e-7f1f2b8c9d01", "pat", "confirmed",
		start, start.Add(30*time.Minute), "pat@example.test", "+4915112345678", 2, time.Now().UTC())
	it.ContactPushToken, it.EventTime = "fcm-token-1", time.Now().UTC()
	if fresh, changed, err := rm.Apply(ctx, "readmodel", "9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f", &it); err != nil || !fresh || !changed {
		t.Fatalf("apply: fresh %v changed %v: %v", fresh, changed, err)
	}
	later := it
	later.Version, later.ContactEmail, later.ContactPhone, later.ContactPushToken = 3, "", "", ""
	if _, changed, err := rm.Apply(ctx, "readmodel", "1f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f", &later); err != nil || !changed {
		t.Fatalf("apply a later event: changed %v: %v", changed, err)
	}
	due, err := queue.DueReminders(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].ContactEmail != "pat@example.test" || due[0].ContactPhone != "+4915112345678" || due[0].ContactPushToken != "fcm-token-1" {
		t.Fatalf("reminders due: %+v", due)
	}
}
