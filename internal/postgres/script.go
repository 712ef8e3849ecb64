package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// Script is one of the store's transactions written out as data: the
// statements it sends — the store's own SQL constants, never a copy — in the
// round trips it sends them in, each argument named. The yardstick that
// prices the write path (`loadtest txcost`) and the raw-SQL leg of
// BenchmarkHold replay it, so they measure the SQL the store runs and
// nothing else; TestHoldScriptIsWhatTheStoreRuns fails when the store's
// statements and the script drift apart.
type Script struct {
	Name  string
	Trips []Trip
	// Pipelined: BEGIN travels with the first trip and COMMIT with the
	// last, as in the store's pipelined transactions (tx_pipelined.go).
	Pipelined bool
}

// Trip is one round trip: its statements travel as one batch.
type Trip struct {
	// Before computes the trip's arguments from what earlier trips returned,
	// with the store's own code, as the store does between the round trips.
	Before func(Vars) error
	Steps  []Step
}

// Step is one statement of a trip.
type Step struct {
	SQL string
	// Args name the statement's arguments: $1 is Args[0].
	Args []string
	// Returns name the columns of the statement's last row, bound as
	// variables for the trips after it. A step with Returns must return a row.
	Returns []string
}

// Vars are the named values a script binds.
type Vars map[string]any

// Statements returns the script's SQL in the order it is sent.
func (sc Script) Statements() [][]string {
	out := make([][]string, 0, len(sc.Trips))
	for _, t := range sc.Trips {
		trip := make([]string, 0, len(t.Steps))
		for _, s := range t.Steps {
			trip = append(trip, s.SQL)
		}
		out = append(out, trip)
	}
	if sc.Pipelined && len(out) > 0 {
		out[0] = append([]string{beginSQL(ReadCommitted)}, out[0]...)
		out[len(out)-1] = append(out[len(out)-1], commitSQL)
	}
	return out
}

// RunScript runs sc once in a READ COMMITTED transaction with the variables
// v (updated in place with what the steps return), pipelined as the store
// runs it when sc.Pipelined. It runs the statements only: no retry, no fence
// interpretation, no idempotent replay — a step that fails, or returns no
// row where one is expected, fails the run.
func (db *DB) RunScript(ctx context.Context, sc Script, v Vars) error {
	run := func(tx pgx.Tx) error {
		for i, trip := range sc.Trips {
			if trip.Before != nil {
				if err := trip.Before(v); err != nil {
					return fmt.Errorf("%s trip %d: %w", sc.Name, i+1, err)
				}
			}
			b := &pgx.Batch{}
			for _, s := range trip.Steps {
				args := make([]any, len(s.Args))
				for j, name := range s.Args {
					val, ok := v[name]
					if !ok {
						return fmt.Errorf("%s trip %d: argument %q is not bound", sc.Name, i+1, name)
					}
					args[j] = val
				}
				b.Queue(s.SQL, args...)
			}
			send := tx.SendBatch
			if sc.Pipelined && i == len(sc.Trips)-1 {
				send = func(ctx context.Context, b *pgx.Batch) pgx.BatchResults { return sendAndCommit(ctx, tx, b) }
			}
			br := send(ctx, b)
			for j, s := range trip.Steps {
				if err := runStep(br, s, v); err != nil {
					br.Close()
					return fmt.Errorf("%s trip %d step %d: %w", sc.Name, i+1, j+1, err)
				}
			}
			if err := br.Close(); err != nil {
				return fmt.Errorf("%s trip %d: %w", sc.Name, i+1, err)
			}
		}
		return nil
	}
	if sc.Pipelined && db.Engine == EnginePostgres {
		return db.attemptPipelined(ctx, run)
	}
	return pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, run)
}

func runStep(br pgx.BatchResults, s Step, v Vars) error {
	if len(s.Returns) == 0 {
		_, err := br.Exec()
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var last []any
	for rows.Next() {
		if last, err = rows.Values(); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if last == nil {
		return fmt.Errorf("no row returned")
	}
	if len(last) != len(s.Returns) {
		return fmt.Errorf("%d columns returned, %d named", len(last), len(s.Returns))
	}
	for k, name := range s.Returns {
		v[name] = last[k]
	}
	return nil
}

// HoldScript is the winning path of Store.Hold — BEGIN with the nights
// taken and the guest's hold counted (under the default per-guest limits),
// then the reservation, outbox event and key with its answer written in one
// statement with COMMIT — for req under the Idempotency-Key key, as the
// store in region with hold TTL ttl sends it. The stored answer is the
// reservation as JSON, the size of what the HTTP layer renders.
func HoldScript(req reservation.HoldRequest, region string, ttl time.Duration, key, requestHash string) (Script, Vars) {
	v := Vars{
		"hotel_id": req.HotelID, "room_type_id": req.RoomTypeID, "region": region, "idem_key": key, "request_hash": requestHash,
		"check_in": req.Stay.CheckIn.Time(), "check_out": req.Stay.CheckOut.Time(), "quantity": req.Quantity,
		"guest_id": req.GuestID, "max_holds": berth.DefaultGuestLimits.Holds, "max_quantity": berth.DefaultGuestLimits.Quantity,
		"nights": req.Stay.Nights(),
	}
	return Script{Name: "hold", Pipelined: true, Trips: []Trip{
		{Steps: []Step{
			{SQL: takeHeldStaySQL, Args: []string{"hotel_id", "room_type_id", "check_in", "check_out", "quantity", "region",
				"guest_id", "max_holds", "max_quantity", "nights"},
				Returns: []string{"night", "price_cents", "currency", "now", "left", "night_version", "guest_holds"}},
		}},
		{Before: func(v Vars) error { return bindHeld(req, region, ttl, v) }, Steps: []Step{
			{SQL: recordHeldAnsweredSQL, Args: []string{"hotel_id", "reservation_id", "region", "room_type_id", "guest_id",
				"check_in", "check_out", "quantity", "status", "hold_expires_at", "total_price_cents", "currency",
				"contact_email", "contact_phone", "created_at", "contact_push_token",
				"event_id", "kind", "event_type", "version", "payload", "trace_context",
				"idem_key", "request_hash", "response_status", "response_body"}},
		}},
	}}, v
}

// bindHeld binds the arguments of the hold's last trip from what the take
// returned, through the same code the store runs.
func bindHeld(req reservation.HoldRequest, region string, ttl time.Duration, v Vars) error {
	var t taken
	var ok [3]bool
	t.now, ok[0] = v["now"].(time.Time)
	t.price, ok[1] = v["price_cents"].(int64)
	t.currency, ok[2] = v["currency"].(string)
	if ok != [3]bool{true, true, true} {
		return fmt.Errorf("the take returned %T %T %T", v["now"], v["price_cents"], v["currency"])
	}
	t.expiresAt = t.now.Add(ttl)
	r := heldReservation(req, t)
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	// The event names what is left of every night taken; the script knows
	// the last row the take returned, which is one night of the stay.
	night, _ := v["night"].(time.Time)
	left, _ := v["left"].(int32)
	nv, _ := v["night_version"].(int64)
	ev := reservationInventoryEvent(reservation.EventHeld, r, []reservation.NightCount{{Night: reservation.DateOf(night).String(),
		Available: int(left), Version: nv}})
	evPayload, err := json.Marshal(ev.data)
	if err != nil {
		return err
	}
	for name, val := range map[string]any{
		"reservation_id": r.ID, "guest_id": r.GuestID, "status": string(r.Status), "hold_expires_at": r.HoldExpiresAt,
		"total_price_cents": r.TotalPriceCents, "contact_email": r.ContactEmail, "contact_phone": r.ContactPhone,
		"contact_push_token": r.ContactPushToken,
		"created_at":         r.CreatedAt, "event_id": newEventID(), "kind": string(ev.kind), "event_type": ev.typ, "version": ev.version,
		"seq": 0, "payload": evPayload, "trace_context": (*string)(nil), "response_status": 201, "response_body": payload, "region": region,
	} {
		v[name] = val
	}
	return nil
}
