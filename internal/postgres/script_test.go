package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
)

// The yardstick and BenchmarkHold replay HoldScript as "the store's hold":
// a winning Store.Hold must send exactly its statements, in its round trips,
// and a replay of the script must leave what a hold leaves.
func TestHoldScriptIsWhatTheStoreRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &dbtest.TripRecorder{}
	env := bookingtest.Start(t, bookingtest.Options{DB: postgres.Options{Tracer: rec}})
	h := env.SeedHotel("", 10, 0, bookingtest.Date(1), bookingtest.Date(10))
	in, _ := reservation.ParseDate(bookingtest.Date(2))
	req := reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID, GuestID: "g1",
		Stay: reservation.Stay{CheckIn: in, CheckOut: in.AddDays(3)}, Quantity: 2}
	idem := &berth.Idem{Key: uuid.NewString(), Hash: "h", Render: func(any, error) (int, []byte) { return 201, []byte(`{}`) }}

	var resp berth.Response
	var err error
	got := rec.Record(func() { resp, err = env.Store.Hold(ctx, req, idem) })
	if err != nil || resp.Status != 201 {
		t.Fatalf("hold: %d %v", resp.Status, err)
	}
	again := req
	again.ReservationID = uuid.NewString()
	script, vars := postgres.HoldScript(again, env.Store.Region(), 10*time.Minute, uuid.NewString(), "h")
	want := script.Statements()
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("the store sent %d round trips that differ from HoldScript's %d:\nstore:  %q\nscript: %q", len(got), len(want), got, want)
	}

	// The replay is a second hold of the same stay, complete with its rows.
	if err := env.DB.RunScript(ctx, script, vars); err != nil {
		t.Fatalf("replay: %v", err)
	}
	var reserved, reservations, events, answers int
	q := `SELECT (SELECT min(reserved) FROM room_inventory WHERE hotel_id = $1 AND night >= $2 AND night < $3),
	             (SELECT count(*) FROM reservations WHERE hotel_id = $1 AND status = 'held' AND quantity = 2),
	             (SELECT count(*) FROM outbox WHERE partition_id = $1 AND event_type = 'reservation.held'),
	             (SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND response_status = 201)`
	if err := dbtest.SQL(env.DB).QueryRow(ctx, q, h.ID, in.Time(), in.AddDays(3).Time()).Scan(&reserved, &reservations, &events, &answers); err != nil {
		t.Fatal(err)
	}
	if reserved != 4 || reservations != 2 || events != 2 || answers != 2 {
		t.Fatalf("after a hold and a replay of its script: reserved %d, reservations %d, events %d, answers %d; want 4, 2, 2, 2",
			reserved, reservations, events, answers)
	}
}
