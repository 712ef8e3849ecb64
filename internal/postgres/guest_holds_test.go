package postgres_test

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
)

// A hold that fills the guest's limit is replayed as its own 201 when its
// key comes again, not refused by the limit it filled; a new request of the
// guest is refused, and neither changes the nights. Batching off: the lone
// hold counts the guest in its take, before the key is written.
func TestReplayOfTheHoldThatFilledTheLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{GuestLimits: berth.GuestLimits{Holds: 1, Quantity: 50}})
	env.Store.SetHoldBatch(0)
	h := env.SeedHotel("", 10, 0, bookingtest.Date(1), bookingtest.Date(10))
	in, _ := reservation.ParseDate(bookingtest.Date(2))
	req := reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID, GuestID: "g1",
		Stay: reservation.Stay{CheckIn: in, CheckOut: in.AddDays(2)}, Quantity: 1}
	render := func(v any, err error) (int, []byte) {
		if err != nil {
			return 409, []byte(berth.ErrorCode(err))
		}
		return 201, []byte(v.(reservation.Reservation).ID)
	}
	key := uuid.NewString()
	first, err := env.Store.Hold(ctx, req, &berth.Idem{Key: key, Hash: "h", Render: render})
	if err != nil || first.Status != 201 {
		t.Fatalf("first hold: %d %s %v", first.Status, first.Body, err)
	}
	again := req
	again.ReservationID = uuid.NewString()
	replay, err := env.Store.Hold(ctx, again, &berth.Idem{Key: key, Hash: "h", Render: render})
	if err != nil || replay.Status != 201 || string(replay.Body) != string(first.Body) {
		t.Fatalf("replay: %d %s %v; want the first answer 201 %s", replay.Status, replay.Body, err, first.Body)
	}
	other := req
	other.ReservationID = uuid.NewString()
	_, err = env.Store.Hold(ctx, other, &berth.Idem{Key: uuid.NewString(), Hash: "h", Render: render})
	if berth.ErrorCode(err) != berth.CodeLimitExceeded {
		t.Fatalf("a second hold of the guest: %v, want limit_exceeded", err)
	}
	env.AssertInventory()
}
