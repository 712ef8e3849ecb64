package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/view"
)

// ApplyAll leaves the view exactly as Apply does when given the same events
// one after another: the same rows, the same contacts kept, the same
// answers (fresh, changed) per event — for rounds mixing new events,
// redeliveries, events the view ignores and versions out of order. Two
// databases take the same random stream, one event at a time and in rounds.
func TestReadModelApplyAllIsApplyInOneStatement(t *testing.T) {
	ctx := context.Background()
	dbOne, _ := dbtest.New(t, postgres.Options{})
	dbAll, _ := dbtest.New(t, postgres.Options{})
	one, all := postgres.NewReadModel(dbOne), postgres.NewReadModel(dbAll)
	rng := rand.New(rand.NewPCG(17, 21))
	base := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	statuses := []string{"held", "confirmed", "checked_in", "checked_out", "cancelled"}
	var (
		stream []view.Change
		seen   []view.Change // events already in the stream, for redeliveries
	)
	for i := range 600 {
		var c view.Change
		switch r := rng.IntN(10); {
		case r < 2 && len(seen) > 0: // a redelivery
			c = seen[rng.IntN(len(seen))]
		case r < 3: // an event the view ignores
			c = view.Change{EventID: fmt.Sprintf("ignored-%d", i)}
		default:
			row, v := rng.IntN(40), int64(1+rng.IntN(6))
			it := view.Item{Kind: []string{"hotel", "clinic"}[row%2], PartitionID: fmt.Sprintf("p%d", row%3), ID: fmt.Sprintf("r%d", row),
				GuestID: fmt.Sprintf("g%d", row%7), Status: statuses[int(v)%len(statuses)], Start: "2027-02-01", End: "2027-02-03",
				SortAt: base.Add(time.Duration(row) * time.Hour), Title: "Hotel stay: 2 nights, 1 room", Version: v,
				UpdatedAt: base.Add(time.Duration(v) * time.Minute), EventTime: base.Add(time.Duration(i) * time.Second)}
			// Contacts come and go between versions: the view keeps the last one given.
			if rng.IntN(2) == 0 {
				it.ContactEmail = fmt.Sprintf("g%d-v%d@example.com", row, v)
			}
			if rng.IntN(3) == 0 {
				it.ContactPhone = fmt.Sprintf("+1555%04d", i)
			}
			if rng.IntN(4) == 0 {
				it.ContactPushToken = fmt.Sprintf("fcm:%d", i)
			}
			c = view.Change{EventID: fmt.Sprintf("e-%d", i), Item: &it}
		}
		stream = append(stream, c)
		seen = append(seen, c)
	}

	var rounds, multi int
	for start := 0; start < len(stream); {
		// A round: up to a random size, at most one event per id and per row
		// (what the projector sends).
		size := 1 + rng.IntN(24)
		var (
			round []view.Change
			ids   = map[string]bool{}
			rows  = map[string]bool{}
		)
		for start < len(stream) && len(round) < size {
			c := stream[start]
			row := ""
			if c.Item != nil {
				row = c.Item.Kind + "/" + c.Item.PartitionID + "/" + c.Item.ID
			}
			if ids[c.EventID] || (row != "" && rows[row]) {
				break
			}
			ids[c.EventID], rows[row] = true, row != ""
			round = append(round, c)
			start++
		}
		got, err := all.ApplyAll(ctx, "readmodel", round)
		if err != nil {
			t.Fatalf("round %d: %v", rounds, err)
		}
		if len(got) != len(round) {
			t.Fatalf("round %d: %d answers for %d events", rounds, len(got), len(round))
		}
		for i, c := range round {
			fresh, changed, err := one.Apply(ctx, "readmodel", c.EventID, c.Item)
			if err != nil {
				t.Fatal(err)
			}
			if want := (view.Applied{Fresh: fresh, Changed: changed}); got[i] != want {
				t.Fatalf("round %d, event %s: ApplyAll says %+v, Apply %+v", rounds, c.EventID, got[i], want)
			}
		}
		rounds++
		if len(round) > 1 {
			multi++
		}
	}
	if multi < rounds/2 {
		t.Fatalf("only %d of %d rounds had more than one event", multi, rounds)
	}
	dump := func(db *postgres.DB) map[string]string {
		rows, err := dbtest.SQL(db).Query(ctx, `SELECT kind || '/' || partition_id || '/' || id, guest_id || ' ' || status || ' ' || version::TEXT || ' ' ||
			coalesce(contact_email, '-') || ' ' || coalesce(contact_phone, '-') || ' ' || coalesce(contact_push_token, '-') || ' ' ||
			start_at || ' ' || end_at || ' ' || title || ' ' || sort_at::TEXT || ' ' || updated_at::TEXT || ' ' || event_time::TEXT
			FROM rm_reservations`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		var marks int
		if err := dbtest.SQL(db).QueryRow(ctx, `SELECT count(*) FROM rm_processed_events`).Scan(&marks); err != nil {
			t.Fatal(err)
		}
		out["processed events"] = fmt.Sprint(marks)
		return out
	}
	wantRows, gotRows := dump(dbOne), dump(dbAll)
	if len(wantRows) < 30 {
		t.Fatalf("only %d rows: the stream is too thin to compare", len(wantRows))
	}
	for k, w := range wantRows {
		if gotRows[k] != w {
			t.Errorf("%s: one by one %q, in rounds %q", k, w, gotRows[k])
		}
	}
	if len(gotRows) != len(wantRows) {
		t.Errorf("%d rows in rounds, %d one by one", len(gotRows), len(wantRows))
	}
	t.Logf("%d events in %d rounds (%d of several events), %d rows", len(stream), rounds, multi, len(wantRows)-1)
}

// One round is all or nothing: when the database refuses one of its events
// (here a NUL byte, which no TEXT column takes), nothing of the round is
// written, so each of its events can be applied alone.
func TestReadModelApplyAllIsAtomic(t *testing.T) {
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	rm := postgres.NewReadModel(db)
	now := time.Now().UTC().Truncate(time.Millisecond)
	item := func(id, guest string) *view.Item {
		return &view.Item{Kind: "hotel", PartitionID: "h1", ID: id, GuestID: guest, Status: "held", Start: "2027-01-10",
			End: "2027-01-12", SortAt: now, Title: "Room", Version: 1, UpdatedAt: now, EventTime: now}
	}
	round := []view.Change{{EventID: "e1", Item: item("r1", "g1")}, {EventID: "e2", Item: item("r2", "g\x00bad")}, {EventID: "e3"}}
	if _, err := rm.ApplyAll(ctx, "readmodel", round); err == nil {
		t.Fatal("a round with an event the database refuses was applied")
	} else if postgres.IsTransient(err) {
		t.Fatalf("the refusal reads as transient (it would be retried for ever): %v", err)
	}
	var rows, marks int
	_ = dbtest.SQL(db).QueryRow(ctx, `SELECT (SELECT count(*) FROM rm_reservations), (SELECT count(*) FROM rm_processed_events)`).Scan(&rows, &marks)
	if rows != 0 || marks != 0 {
		t.Fatalf("a failed round left %d rows and %d marks", rows, marks)
	}
	for _, c := range round {
		fresh, _, err := rm.Apply(ctx, "readmodel", c.EventID, c.Item)
		if (err != nil) != (c.EventID == "e2") || (err == nil && !fresh) {
			t.Fatalf("%s alone: fresh %v err %v", c.EventID, fresh, err)
		}
	}
}
