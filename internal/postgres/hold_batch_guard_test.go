package postgres_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

var errRollback = errors.New("roll back")

// Each guarded statement of a batch's committing round trip fails with
// SQLSTATE 22012 when its rows fall short of what the batch decided, and
// passes when they do not (ADR 0030): the take when a night lacks the
// rooms (which the locked rows make impossible in the store, so it is
// driven here directly), the guests' count when a guest is at a limit, the
// keys' claim when a key is taken.
func TestBatchGuardsFireWhenShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
	h := env.SeedHotel("", 2, 0, bookingtest.Date(1), bookingtest.Date(10))
	db := dbtest.SQL(env.DB)
	night := func(i int) time.Time {
		d, err := reservation.ParseDate(bookingtest.Date(i))
		if err != nil {
			t.Fatal(err)
		}
		return d.Time()
	}
	taken := uuid.NewString()
	if _, err := db.Exec(ctx, `INSERT INTO idempotency_keys (partition_id, idem_key, home_region, request_hash, response_status, response_body)
		VALUES ($1, $2, 'us-east', 'h', 201, '{}')`, h.ID, taken); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO guest_holds (hotel_id, guest_id, home_region, holds, rooms) VALUES ($1, 'full', 'us-east', 1, 1)`,
		h.ID); err != nil {
		t.Fatal(err)
	}
	nights := []time.Time{night(2), night(3)}
	for _, c := range []struct {
		name  string
		sql   string
		args  []any
		fires bool
	}{
		{"take: every night has the rooms", postgres.TakeBatchGuardedSQL,
			[]any{h.ID, h.RoomTypeID, nights, []int32{2, 2}, []int32{1, 1}, "us-east", int64(2)}, false},
		{"take: one night lacks them", postgres.TakeBatchGuardedSQL,
			[]any{h.ID, h.RoomTypeID, nights, []int32{2, 3}, []int32{1, 1}, "us-east", int64(2)}, true},
		{"take: the nights homed elsewhere", postgres.TakeBatchGuardedSQL,
			[]any{h.ID, h.RoomTypeID, nights, []int32{1, 1}, []int32{1, 1}, "eu-west", int64(2)}, true},
		{"guests: every one counted", postgres.CountBatchGuestsGuardedSQL,
			[]any{h.ID, "us-east", []string{"a", "b"}, []int32{1, 1}, int32(1), int32(5), int64(2)}, false},
		{"guests: one at its limit", postgres.CountBatchGuestsGuardedSQL,
			[]any{h.ID, "us-east", []string{"a", "full"}, []int32{1, 1}, int32(1), int32(5), int64(2)}, true},
		{"keys: every one claimed", postgres.ClaimBatchKeysGuardedSQL,
			[]any{h.ID, "us-east", []string{uuid.NewString(), uuid.NewString()}, []string{"h", "h"}, []int32{201, 409},
				[][]byte{[]byte("{}"), []byte("{}")}, int64(2)}, false},
		{"keys: one taken already", postgres.ClaimBatchKeysGuardedSQL,
			[]any{h.ID, "us-east", []string{uuid.NewString(), taken}, []string{"h", "h"}, []int32{201, 201},
				[][]byte{[]byte("{}"), []byte("{}")}, int64(2)}, true},
	} {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, c.sql, c.args...)
			if err == nil {
				return errRollback // leave the database as it was for the next case
			}
			return err
		})
		switch {
		case c.fires && sqlState(err) != "22012":
			t.Errorf("%s: %v, want SQLSTATE 22012", c.name, err)
		case !c.fires && !errors.Is(err, errRollback):
			t.Errorf("%s: %v, want no error", c.name, err)
		}
	}
}

// A guard that fires in a batch's committing round trip commits nothing of
// the batch: the batch runs again, checked before its COMMIT, and every
// hold gets the answer it gets without batching. Each case forms one batch
// behind a held night lock: a replay of an answered key among fresh holds
// (the keys' guard), a guest at its limit among them (the guests' guard).
// Afterwards the inventory agrees with the reservations (every night's
// reserved count is its live reservations' rooms), every 201 is one
// reservation, and the batch ran twice.
func TestBatchGuardCommitsNothing(t *testing.T) {
	t.Parallel()
	for _, odd := range []string{"replay", "guest at its limit"} {
		t.Run(odd, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			env := bookingtest.Start(t, bookingtest.Options{Region: "us-east"})
			h := env.SeedHotel("", 50, 0, bookingtest.Date(1), bookingtest.Date(20))
			store := postgres.NewStore(env.DB, "us-east", 10*time.Minute)
			replay := odd == "replay"
			if replay {
				// Its guest may hold again: only the key's guard fires.
				store.SetGuestLimits(berth.GuestLimits{Holds: 10, Quantity: 50})
			} else {
				store.SetGuestLimits(berth.GuestLimits{Holds: 1, Quantity: 5})
			}
			store.SetHoldBatch(64)
			db := dbtest.SQL(env.DB)

			first := holdOf(t, h, "early", 3, 1, 1)
			firstKey := uuid.NewString()
			answered := doHold(store, first, firstKey, "h")
			if answered.status != http.StatusCreated {
				t.Fatalf("first hold: %+v", answered)
			}
			// The replay is the same request again, with the reservation id
			// the API gives every request.
			again := first
			again.ReservationID = uuid.NewString()
			odd := struct {
				req  reservation.HoldRequest
				key  string
				want answer
			}{again, firstKey, answered}
			if !replay {
				odd.req, odd.key = holdOf(t, h, "early", 6, 1, 1), uuid.NewString()
			}

			lock := lockNight(t, env, h, 5)
			type call struct {
				req reservation.HoldRequest
				key string
			}
			calls := []call{{holdOf(t, h, "leader", 5, 2, 1), uuid.NewString()}}
			for i, g := range []string{"g1", "g2", "g3", "g4", "g5"} {
				calls = append(calls, call{holdOf(t, h, g, 4+i, 2, 1), uuid.NewString()})
				if i == 2 {
					calls = append(calls, call{odd.req, odd.key})
				}
			}
			holds := make([]func() answer, len(calls))
			for i, c := range calls {
				holds[i] = func() answer { return doHold(store, c.req, c.key, "h") }
			}
			answers := queueInOrder(t, store, h, holds)
			if err := lock.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			out := answers()

			created := 1 // the first hold
			for i, c := range calls {
				a := out[i]
				switch {
				case c.key != odd.key:
					if a.err != nil || a.status != http.StatusCreated {
						t.Errorf("hold %d: %+v, want 201", i, a)
					}
					created++
				case odd.key == firstKey:
					if a != odd.want {
						t.Errorf("the replay: %+v, want the first answer %+v", a, odd.want)
					}
				default:
					if berth.ErrorCode(a.err) != berth.CodeLimitExceeded {
						t.Errorf("the guest at its limit: %+v, want limit_exceeded", a)
					}
				}
			}
			var reservations int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE hotel_id = $1`, h.ID).Scan(&reservations); err != nil {
				t.Fatal(err)
			}
			if reservations != created {
				t.Errorf("%d reservations, want %d (one per 201)", reservations, created)
			}
			if s := store.HoldBatchStats(); s.Reruns != 1 || s.Batches != 1 {
				t.Errorf("batching: %+v, want one batch committed after one rerun", s)
			}
			env.AssertInventory()
		})
	}
}
