package postgres_test

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
)

// A winning hold records its reservation, its event and its key in one
// statement (ADR 0023): with a key, all three rows commit and the answer is
// stored; without one, the reservation and its event, and no key row. A
// second hold under a claimed key writes none of its rows (the statement
// fails whole on the key) and replays the first answer.
func TestWinningHoldRecordsEveryRowInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 10, 0, bookingtest.Date(1), bookingtest.Date(10))
	in, _ := reservation.ParseDate(bookingtest.Date(2))
	req := func() reservation.HoldRequest {
		return reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID,
			GuestID: "g-" + uuid.NewString(), Stay: reservation.Stay{CheckIn: in, CheckOut: in.AddDays(2)}, Quantity: 1,
			ContactEmail: "guest@example.com"}
	}
	rows := func(resID string) (reservations, events, keys int) {
		t.Helper()
		q := `SELECT (SELECT count(*) FROM reservations WHERE hotel_id = $1 AND reservation_id = $2::UUID AND status = 'held'
		                AND contact_email = 'guest@example.com' AND contact_phone IS NULL),
		             (SELECT count(*) FROM outbox WHERE partition_id = $1 AND aggregate_id = $2::UUID AND event_type = 'reservation.held'
		                AND home_region = $3 AND seq = 0 AND aggregate_version = 1),
		             (SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND response_body = convert_to($2::TEXT, 'UTF8'))`
		if err := dbtest.SQL(env.DB).QueryRow(ctx, q, h.ID, resID, env.Store.Region()).Scan(&reservations, &events, &keys); err != nil {
			t.Fatal(err)
		}
		return
	}

	// Without a key.
	bare := req()
	resp, err := env.Store.Hold(ctx, bare, nil)
	if err != nil {
		t.Fatalf("hold without a key: %v", err)
	}
	if r, ok := resp.Value.(reservation.Reservation); !ok || r.ID != bare.ReservationID {
		t.Fatalf("hold without a key answered %#v", resp.Value)
	}
	if r, e, k := rows(bare.ReservationID); r != 1 || e != 1 || k != 0 {
		t.Fatalf("hold without a key: reservations %d, events %d, keys %d; want 1, 1, 0", r, e, k)
	}

	// With a key; the stored answer is the reservation's id (render below).
	key := uuid.NewString()
	render := func(v any, err error) (int, []byte) {
		if err != nil {
			return 409, []byte(berth.ErrorCode(err))
		}
		return 201, []byte(v.(reservation.Reservation).ID)
	}
	first := req()
	resp, err = env.Store.Hold(ctx, first, &berth.Idem{Key: key, Hash: "h", Render: render})
	if err != nil || resp.Status != 201 || string(resp.Body) != first.ReservationID {
		t.Fatalf("hold with a key: %d %q %v", resp.Status, resp.Body, err)
	}
	if r, e, k := rows(first.ReservationID); r != 1 || e != 1 || k != 1 {
		t.Fatalf("hold with a key: reservations %d, events %d, keys %d; want 1, 1, 1", r, e, k)
	}

	// The same key again, another reservation id: it takes the nights, its
	// record fails on the key, and it replays the first answer.
	again := req()
	resp, err = env.Store.Hold(ctx, again, &berth.Idem{Key: key, Hash: "h", Render: render})
	if err != nil || resp.Status != 201 || string(resp.Body) != first.ReservationID || !resp.Replayed {
		t.Fatalf("replayed hold: %d %q replayed=%v %v", resp.Status, resp.Body, resp.Replayed, err)
	}
	if r, e, k := rows(again.ReservationID); r != 0 || e != 0 || k != 0 {
		t.Fatalf("the replay wrote rows: reservations %d, events %d, keys %d; want none", r, e, k)
	}
	var reserved int
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT min(reserved) FROM room_inventory WHERE hotel_id = $1 AND night >= $2 AND night < $3`,
		h.ID, in.Time(), in.AddDays(2).Time()).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if reserved != 2 {
		t.Fatalf("reserved %d after two holds and a replay; want 2", reserved)
	}
}
