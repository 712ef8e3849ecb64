package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/view"
)

// Apply writes an event's view row once, in one statement: the first
// delivery is fresh and changes the row, a redelivery changes nothing, a
// newer version of the row wins and an older one does not. It fails when
// the statement's columns and upsertArgs drift apart.
func TestReadModelApplyOnce(t *testing.T) {
	db, _ := dbtest.New(t, postgres.Options{})
	rm := postgres.NewReadModel(db)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	it := view.Item{Kind: "hotel", PartitionID: "h1", ID: "r1", GuestID: "g1", Status: "held", Start: "2027-01-10",
		End: "2027-01-12", SortAt: now, Title: "Room", ContactEmail: "g@example.com", ContactPhone: "+100",
		ContactPushToken: "tok", Version: 1, UpdatedAt: now, EventTime: now}
	for _, step := range []struct {
		name, event    string
		version        int64
		status         string
		fresh, changed bool
		wantStatus     string
	}{
		{"first delivery", "e1", 1, "held", true, true, "held"},
		{"redelivery", "e1", 1, "held", false, false, "held"},
		{"newer version", "e2", 2, "confirmed", true, true, "confirmed"},
		{"older version late", "e3", 1, "held", true, false, "confirmed"},
	} {
		it.Version, it.Status = step.version, step.status
		fresh, changed, err := rm.Apply(ctx, "readmodel", step.event, &it)
		if err != nil || fresh != step.fresh || changed != step.changed {
			t.Fatalf("%s: fresh %v changed %v err %v; want %v %v", step.name, fresh, changed, err, step.fresh, step.changed)
		}
		got, err := rm.Get(ctx, "hotel", "h1", "r1")
		if err != nil || got.Status != step.wantStatus {
			t.Fatalf("%s: view row %+v, %v; want status %s", step.name, got, err, step.wantStatus)
		}
	}
	if fresh, changed, err := rm.Apply(ctx, "readmodel", "e4", nil); err != nil || !fresh || changed {
		t.Fatalf("event without a row: fresh %v changed %v err %v; want fresh, unchanged", fresh, changed, err)
	}
}
