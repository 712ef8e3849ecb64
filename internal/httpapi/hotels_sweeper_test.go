package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// Confirm races the expiry sweeper on the same lapsed holds, many times,
// while other guests try to take the rooms the sweeper gives back. Each
// reservation ends confirmed (200) or expired (409 hold_expired, with a
// refund_requested event) — never both — and the inventory stays consistent.
func TestConfirmRacesSweeper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Holds of this server lapse at once (1 µs TTL): every confirm below is a
	// late payment racing the sweeper.
	env := bookingtest.Start(t, bookingtest.Options{HoldTTL: time.Microsecond, DB: postgres.Options{MaxConns: 16}})
	// Other guests book through a server with a normal TTL on the same DB.
	rivals := bookingtest.StartOn(t, env.DB, env.DBURL, bookingtest.Options{HoldTTL: 10 * time.Minute})
	const rounds, perRound = 10, 12
	totals := map[string]int{}
	for round := range rounds {
		h := env.SeedHotel("", perRound, 0, bookingtest.Date(1), bookingtest.Date(20))
		in, out := bookingtest.Date(5), bookingtest.Date(7)
		admin := env.Admin()
		ids, refs, guests := make([]string, perRound), make([]string, perRound), make([]string, perRound)
		for i := range ids {
			// Each guest holds and pays (the provider reports the intent as
			// succeeded) before confirming: the payment is verified, and late.
			guests[i] = env.Token(fmt.Sprintf("late-%d", i), berth.RoleGuest)
			r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: guests[i],
				IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": fmt.Sprintf("late-%d", i),
					"room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}})
			if r.Status != http.StatusCreated {
				t.Fatalf("hold: %d %s", r.Status, r.Body)
			}
			ids[i], refs[i] = r.JSON()["reservation_id"].(string), env.PayHold(r)
		}
		var (
			wg       sync.WaitGroup
			stop     atomic.Bool
			answers  = make([]string, perRound)
			sweepErr atomic.Value
		)
		wg.Add(1)
		go func() { // the sweeper, running flat out
			defer wg.Done()
			for !stop.Load() {
				if _, err := env.Store.ExpireHolds(ctx, 5); err != nil {
					sweepErr.Store(err)
					return
				}
			}
		}()
		for i := range perRound / 2 { // rivals grab rooms as they come back
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					r, err := rivals.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
						Token: admin, IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": fmt.Sprintf("rival-%d", i),
							"room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}})
					if err == nil && r.Status == http.StatusCreated {
						return
					}
				}
			}()
		}
		var confirms sync.WaitGroup
		for i, id := range ids {
			confirms.Add(1)
			go func() {
				defer confirms.Done()
				r, err := env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/confirm",
					Token: guests[i], IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": refs[i]}})
				if err != nil {
					answers[i] = err.Error()
					return
				}
				answers[i] = fmt.Sprintf("%d %s", r.Status, r.Code())
			}()
		}
		confirms.Wait()
		stop.Store(true)
		wg.Wait()
		if err, _ := sweepErr.Load().(error); err != nil {
			t.Fatalf("sweeper: %v", err)
		}
		for i, id := range ids {
			totals[answers[i]]++
			var status string
			var refunds int
			if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT status FROM reservations WHERE hotel_id = $1 AND reservation_id = $2`, h.ID, id).Scan(&status); err != nil {
				t.Fatal(err)
			}
			if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND event_type = 'refund_requested'`, id).Scan(&refunds); err != nil {
				t.Fatal(err)
			}
			switch answers[i] {
			case "200 ":
				if status != "confirmed" || refunds != 0 {
					t.Errorf("round %d: %s answered 200 but is %s with %d refund events", round, id, status, refunds)
				}
			case "409 hold_expired":
				if status != "expired" || refunds != 1 {
					t.Errorf("round %d: %s answered hold_expired but is %s with %d refund events", round, id, status, refunds)
				}
			default:
				t.Errorf("round %d: confirm of %s answered %q", round, id, answers[i])
			}
		}
		env.AssertInventory()
	}
	t.Logf("confirm outcomes over %d rounds: %v", rounds, totals)
	// Every confirm answered one of the two outcomes (checked above, one by
	// one), and both happened: a run in which one side always won did not
	// race the two at all and proves nothing about the race.
	if won, lost := totals["200 "], totals["409 hold_expired"]; won+lost != rounds*perRound || won == 0 || lost == 0 {
		t.Fatalf("outcomes %v: want %d answers, some confirmed (200) and some expired (409 hold_expired)", totals, rounds*perRound)
	}
}
