package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/soldout"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The hold is the write path's hot transaction, so it is lean
// (docs/adr/0007-lean-hold.md, docs/adr/0018-guest-count-and-pipelined-hold.md).
// A winning hold is two round trips, BEGIN and COMMIT included (a
// pipelined transaction, tx_pipelined.go):
//
//  1. BEGIN and takeHeldStaySQL: the nights, fenced by their own
//     home_region, with the price and the database time, and — in the same
//     statement, once every night is taken — the guest's hold counted
//     against the per-guest limits (a conditional write on the guest's row,
//     last in the lock order);
//  2. the reservation, its outbox event and the Idempotency-Key with the
//     stored answer in one statement (recordHeldAnsweredSQL), and COMMIT.
//
// It takes no placement row: the nights it locks are the fence, because a
// move re-homes them in its transaction (MovePlacement locks them in the
// partition's lock order). It claims its key last: a concurrent duplicate
// queues on the same nights, the guest's row or the key, and whichever
// commits second finds the key taken, rolls back and replays the first
// one's answer. Everything the hold decides in Go (every night taken, the
// guest counted) is known after the first round trip; the second can only
// fail in the server, and then its COMMIT does not run.
//
// A hold that does not get every night is refused by refuseHold, with the
// placement fence and the key claim first, as every other write.

// takeHeldStaySQL is takeStaySQL followed, when it took all $10 nights, by
// takeGuestHoldSQL's conditional write on the guest's row ($7 guest, $8 the
// holds limit, $9 the rooms limit): one statement, so the count costs no
// statement of its own, and the take's locking read has locked the nights
// (in date order) before the row is written, because the write's WHERE reads the
// take's result. Every returned night carries the guest's new hold count,
// NULL when a limit refused it (then the caller rolls back).
const takeHeldStaySQL = `WITH t AS (` + takeStaySQL + `), g AS (
INSERT INTO guest_holds AS g (hotel_id, guest_id, home_region, holds, rooms)
SELECT $1::UUID, $7::TEXT, $6::TEXT, 1, $5::INT4
WHERE 1 <= $8::INT4 AND $5::INT4 <= $9::INT4 AND (SELECT count(*) FROM t) = $10::INT8
ON CONFLICT (hotel_id, guest_id) DO UPDATE SET holds = g.holds + 1, rooms = g.rooms + excluded.rooms
WHERE g.holds + 1 <= $8::INT4 AND g.rooms + excluded.rooms <= $9::INT4
RETURNING g.holds)
SELECT t.*, (SELECT holds FROM g) FROM t`

// insertAnsweredKeySQL claims an Idempotency-Key together with its answer,
// at the end of a winning hold. A key claimed already (a replay, or a
// duplicate that committed first) fails it with a unique violation of
// idempotency_keys_pkey, which skips the COMMIT queued behind it; the hold
// then rolls back and replays the stored answer. A duplicate still in
// flight makes it wait, as the claim at the start of other writes does
// (lock_timeout: 409 idempotency_in_progress).
const insertAnsweredKeySQL = `INSERT INTO idempotency_keys (partition_id, idem_key, home_region, request_hash, response_status, response_body)
	VALUES ($1, $2, $3, $4, $5, $6)`

// recordHeldSQL and recordHeldAnsweredSQL write what a winning hold
// records — its reservation (insertReservationSQL), its reservation.held
// event (insertOutboxSQL) and, with a key, the key with its answer
// (insertAnsweredKeySQL) — as one statement: one Bind/Execute and one
// executor run in the server instead of three, and one result for the
// client to read (docs/adr/0023-database-work-per-hold.md). The rows are
// the same: every sub-statement runs to completion whether the main one
// reads it or not, and a failure of any
// (the key claimed already: a unique violation of idempotency_keys_pkey)
// fails the whole statement, so the COMMIT queued behind it does not run.
// The reservation and event rows have fresh ids and never wait; the key is
// the only row that can, on a duplicate in flight.
const (
	recordHeldReservationSQL = `INSERT INTO reservations (hotel_id, reservation_id, home_region, room_type_id, guest_id, check_in,
		check_out, quantity, status, hold_expires_at, total_price_cents, currency, contact_email, contact_phone, version, created_at,
		updated_at, contact_push_token)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULLIF($13, ''), NULLIF($14, ''), 1, $15, $15, NULLIF($16, ''))`
	recordHeldEventSQL = `INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type, aggregate_id, aggregate_version, seq,
		payload, trace_context)
	VALUES ($1, $17, $3, $18, $19, $2, $20, 0, $21, $22)`
	recordHeldSQL         = `WITH r AS (` + recordHeldReservationSQL + `) ` + recordHeldEventSQL
	recordHeldAnsweredSQL = `WITH r AS (` + recordHeldReservationSQL + `), e AS (` + recordHeldEventSQL + `)
INSERT INTO idempotency_keys (partition_id, idem_key, home_region, request_hash, response_status, response_body)
	VALUES ($1, $23, $3, $24, $25, $26)`
)

// recordHeldArgs are recordHeldSQL's arguments ($1–$22) for reservation r
// and its held event e, written in region, with room for the key's four
// that recordHeldAnsweredSQL appends. Their Go types are those pgx encodes
// its parameters' types from without a conversion (holdParams).
func recordHeldArgs(ctx context.Context, region string, r reservation.Reservation, e event) ([]any, error) {
	payload, err := eventPayload(e)
	if err != nil {
		return nil, err
	}
	var tc any // NULL
	if s := traceContext(ctx); s != nil {
		tc = *s
	}
	args := make([]any, 0, 26)
	return append(args, r.HotelID, r.ID, region, r.RoomTypeID, r.GuestID, pgDate(r.CheckIn), pgDate(r.CheckOut),
		int4(r.Quantity), string(r.Status), pgTime(r.HoldExpiresAt), r.TotalPriceCents, r.Currency, r.ContactEmail, r.ContactPhone,
		pgTime(r.CreatedAt), r.ContactPushToken,
		newEventID(), string(e.kind), e.typ, e.version, payload, tc), nil
}

// The hold's parameters are passed as values of the Go types pgx encodes
// their database types from directly: a string for UUID and TEXT (sent as
// text, as is), int32 for INT4, int64 for INT8, pgtype.Date and
// pgtype.Timestamptz for DATE and TIMESTAMPTZ. Any other Go type is
// encoded as well, the same bytes, through a wrapper plan of pgx's that
// converts the value on every call first (a time.Time, an int) — a cost
// paid for each of the hold's 36 parameters. A type that does not match
// the server's (another engine inferring INT8 for an INT4 here) still
// encodes through such a plan: the types choose the speed, never the
// bytes.

// int4 is n as pgx's INT4 value. One outside INT4's range stays an int,
// which pgx refuses to encode, as it did before.
func int4(n int) any {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return n
	}
	return int32(n)
}

// pgDate is d as pgx's DATE value.
func pgDate(d reservation.Date) pgtype.Date { return pgtype.Date{Time: d.Time(), Valid: true} }

// pgTime is t as pgx's TIMESTAMPTZ value.
func pgTime(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t, Valid: true} }

// keyTaken says whether err is insertAnsweredKeySQL finding its key claimed.
func keyTaken(err error) bool {
	return sqlState(err) == "23505" && constraintName(err) == "idempotency_keys_pkey"
}

// takeHeldStay runs takeHeldStaySQL for req: the nights taken and whether
// the guest's hold was counted (false when a limit refused it or not every
// night was taken).
func takeHeldStay(ctx context.Context, tx pgx.Tx, region string, req reservation.HoldRequest, limits berth.GuestLimits) (t taken, counted bool, err error) {
	// A batch of one, so that the pipelined transaction's BEGIN goes with it.
	b := &pgx.Batch{}
	queueHeldTake(b, region, req, limits)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if t, counted, err = readHeldTake(br, req); err != nil {
		return t, false, err
	}
	if err := br.Close(); err != nil {
		return t, false, fmt.Errorf("take nights: %w", err)
	}
	return t, counted, nil
}

// queueHeldTake queues req's takeHeldStaySQL.
func queueHeldTake(b *pgx.Batch, region string, req reservation.HoldRequest, limits berth.GuestLimits) {
	b.Queue(takeHeldStaySQL, req.HotelID, req.RoomTypeID, pgDate(req.Stay.CheckIn), pgDate(req.Stay.CheckOut), int4(req.Quantity),
		region, req.GuestID, int4(limits.Holds), int4(limits.Quantity), int64(req.Stay.Nights()))
}

// readHeldTake reads what queueHeldTake's statement took: the nights, and
// whether the guest's hold was counted.
func readHeldTake(br pgx.BatchResults, req reservation.HoldRequest) (t taken, counted bool, err error) {
	rows, err := br.Query()
	if err != nil {
		return t, false, fmt.Errorf("take nights: %w", err)
	}
	defer rows.Close()
	var row nightRow
	for rows.Next() {
		if err := row.scan(rows, true); err != nil {
			return t, false, fmt.Errorf("take nights: %w", err)
		}
		t.add(&row, req.Stay.Nights())
		counted = row.holds.Valid
	}
	if err := rows.Err(); err != nil {
		return t, false, fmt.Errorf("take nights: %w", err)
	}
	return t, counted, nil
}

var (
	// errKeyTaken rolls a winning hold back: its key was claimed already.
	errKeyTaken = errors.New("idempotency key claimed already")
	// errPartialTake rolls a hold back that got some nights but not all:
	// it is refused in a transaction of its own.
	errPartialTake = errors.New("some nights taken, not all")
	// errLockBusy says a NOWAIT lock was held by another transaction.
	errLockBusy = errors.New("lock held")
)

// Hold takes every night of the stay now and records a held reservation that
// expires after the store's hold TTL (database time).
//
// With a sold-out cache (UseSoldOutCache), a stay the cache knows to lack
// the rooms is refused without a transaction: the database is asked only
// whether the Idempotency-Key has an answer already (then it is replayed).
// Such a refusal commits nothing, so nothing is stored with the key.
//
// With batching on (SetHoldBatch, hold_batch.go), a hold of a room type
// whose hold transaction is running waits for it and is then decided with
// the others that waited, in one transaction, with an answer of its own.
func (s *Store) Hold(ctx context.Context, req reservation.HoldRequest, idem *berth.Idem) (berth.Response, error) {
	var gen uint64
	if s.soldOut != nil {
		if resp, ok, err := s.refuseKnownSoldOut(ctx, req, idem); ok {
			return resp, err
		}
		gen = s.soldOut.Generation(req.HotelID)
		if idem != nil {
			defer s.inFlight(req.HotelID, idem.Key)()
		}
	}
	if s.HoldBatch() > 1 {
		return s.holdQueued(ctx, req, idem, gen)
	}
	return s.holdAlone(ctx, req, idem, gen)
}

// holdAlone is a hold in a transaction of its own (gen: the hotel's
// sold-out generation when the hold began).
func (s *Store) holdAlone(ctx context.Context, req reservation.HoldRequest, idem *berth.Idem, gen uint64) (berth.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, got, left, err := s.hold(ctx, req, idem, gen)
		if err == nil && (idem == nil || resp.Status < 300) {
			s.learnFromWin(req, left, gen)
		}
		switch {
		case errors.Is(err, errKeyTaken):
			resp, err = s.replay(ctx, req.HotelID, idem)
		case errors.Is(err, errPartialTake), errors.Is(err, errLockBusy):
			// The rollback let go of every row: refuse with the fence first.
			resp, err = s.write(ctx, berth.KindHotel, req.HotelID, idem, func(tx pgx.Tx, _ *pgx.Batch) (any, error) {
				return nil, s.refuseHold(ctx, tx, req, got, gen)
			})
		}
		if errors.Is(err, errRetry) && attempt < 3 {
			continue // the key was pruned between the claim and its read
		}
		if err != nil {
			return berth.Response{}, classify(err)
		}
		return resp, nil
	}
}

// hold runs the hold transaction. When it could not take every night, got
// holds the nights it did take (then rolled back); when it won, left is
// what its take left of each night.
func (s *Store) hold(ctx context.Context, req reservation.HoldRequest, idem *berth.Idem, gen uint64) (berth.Response, []time.Time, []reservation.NightCount, error) {
	var (
		resp berth.Response
		got  []time.Time
		left []reservation.NightCount
	)
	err := s.db.InPipelinedTx(ctx, func(tx pgx.Tx) error {
		resp, got, left = berth.Response{}, nil, nil
		t, counted, err := takeHeldStay(ctx, tx, s.region, req, s.limits)
		if err != nil {
			return err
		}
		if len(t.nights) < req.Stay.Nights() {
			got = t.nights
			if len(t.nights) > 0 {
				return errPartialTake
			}
			// Nothing taken: refuse in this transaction. Its take may still
			// hold a night it waited for and then found full, so the fence
			// must not queue behind a move (which waits for that night).
			resp, err = s.writeIn(ctx, tx, fenceNowaitSQL, berth.KindHotel, req.HotelID, idem, nil, func(tx pgx.Tx, _ *pgx.Batch) (any, error) {
				return nil, s.refuseHold(ctx, tx, req, nil, gen)
			})
			return err
		}
		if !counted {
			// Past a per-guest limit: roll everything back, nights included
			// — unless the key has an answer (a replay answers as the first
			// time, limit or not; the first time may be what filled it).
			if idem != nil {
				if _, err := tx.Exec(ctx, insertAnsweredKeySQL, req.HotelID, idem.Key, s.region, idem.Hash, nil, nil); err != nil {
					if keyTaken(err) {
						return errKeyTaken
					}
					return claimError(err)
				}
			}
			return s.limitRefusal(ctx, tx, req)
		}
		left = t.counts
		b := &pgx.Batch{}
		if resp, err = s.queueRecordHeld(ctx, b, req, idem, t); err != nil {
			return err
		}
		br := sendAndCommit(ctx, tx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return recordHeldError(idem, err)
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("record hold: %w", err)
		}
		return nil
	})
	return resp, got, left, err
}

// heldRecord is what a hold that took every night of its stay (t) records
// — its reservation r and its reservation.held event e — and its answer,
// rendered for the key when there is one: the same for a hold alone
// (queueRecordHeld) and in a group (groupRecord).
func (s *Store) heldRecord(req reservation.HoldRequest, idem *berth.Idem, t taken) (r reservation.Reservation, e event, resp berth.Response, err error) {
	t.expiresAt = t.now.Add(s.holdTTL)
	r = heldReservation(req, t)
	e = reservationInventoryEvent(reservation.EventHeld, r, t.counts)
	if idem == nil {
		return r, e, berth.Response{Value: r}, nil
	}
	resp, err = renderAnswer(idem, r, nil)
	return r, e, resp, err
}

// queueRecordHeld queues what a hold that took every night of its stay (t)
// records — its reservation, its event and, with a key, the key with the
// answer — and returns that answer. ctx carries the request's trace.
func (s *Store) queueRecordHeld(ctx context.Context, b *pgx.Batch, req reservation.HoldRequest, idem *berth.Idem, t taken) (berth.Response, error) {
	r, e, resp, err := s.heldRecord(req, idem, t)
	if err != nil {
		return berth.Response{}, err
	}
	args, err := recordHeldArgs(ctx, s.region, r, e)
	if err != nil {
		return berth.Response{}, err
	}
	if idem == nil {
		b.Queue(recordHeldSQL, args...)
		return resp, nil
	}
	b.Queue(recordHeldAnsweredSQL, append(args, idem.Key, idem.Hash, int4(resp.Status), resp.Body)...)
	return resp, nil
}

// recordHeldError is what the failure of queueRecordHeld's statement means.
func recordHeldError(idem *berth.Idem, err error) error {
	switch {
	case idem != nil && keyTaken(err):
		return errKeyTaken // a replay, or a duplicate committed first
	case idem != nil && sqlState(err) == "55P03":
		// Only the key waits (the other rows are new): a duplicate
		// still in flight past lock_timeout.
		return claimError(err)
	}
	return fmt.Errorf("record hold: %w", err)
}

// refuseHold answers a hold that did not get every night, inside a fenced
// write holding its key: 404 for an unknown room type, else 409 sold_out
// naming the nights that lacked rooms — the nights the take missed when it
// got some (got), else those the committed state shows short. The sold-out
// cache learns them (gen: the hotel's generation when the hold began).
func (s *Store) refuseHold(ctx context.Context, tx pgx.Tx, req reservation.HoldRequest, got []time.Time, gen uint64) error {
	var (
		exists    bool
		available []time.Time
	)
	if err := tx.QueryRow(ctx, nightsWithRoomsSQL, req.HotelID, req.RoomTypeID, req.Stay.CheckIn.Time(), req.Stay.CheckOut.Time(),
		req.Quantity).Scan(&exists, &available); err != nil {
		return fmt.Errorf("read nights: %w", err)
	}
	if !exists {
		return berth.Errorf(berth.CodeNotFound, "room type %s not found", req.RoomTypeID)
	}
	if len(got) == 0 {
		got = available
	}
	failed := failedNights(req.Stay, got)
	if s.soldOut != nil && len(got) < req.Stay.Nights() {
		// Only nights that did lack rooms: not when they all came back.
		s.soldOut.Learn(req.HotelID, req.RoomTypeID, failed, req.Quantity, gen)
	}
	return soldOutError(req.Stay, req.Quantity, failed)
}

// refuseKnownSoldOut answers a hold from the sold-out cache when it knows a
// night of the stay lacks the rooms (ok); otherwise the hold goes on to the
// database. A key with a stored answer is replayed instead; a key of a hold
// still running in this process goes to the database, which waits for it
// (refusalOf).
func (s *Store) refuseKnownSoldOut(ctx context.Context, req reservation.HoldRequest, idem *berth.Idem) (berth.Response, bool, error) {
	short := s.soldOut.Refuses(req.HotelID, req.RoomTypeID, nightsOf(req.Stay), req.Quantity)
	if len(short) == 0 {
		return berth.Response{}, false, nil
	}
	refusal, ok := s.refusalOf(req, idem, short, 0)
	switch {
	case !ok:
		return berth.Response{}, false, nil
	case idem == nil:
		return berth.Response{}, true, refusal
	}
	resp, err := s.refusalReplay(ctx, req.HotelID, idem, refusal)
	return resp, true, err
}

// refusalOf is the cache's refusal of a hold whose nights short lack the
// rooms — final without a key, else to be rendered as the key's answer
// unless the key has one (refusalReplay) — or ok false when another hold
// with its key runs in this process: the database, which waits for it,
// answers. own is how many of the running holds with this key are the
// caller itself (a queued hold counts itself).
func (s *Store) refusalOf(req reservation.HoldRequest, idem *berth.Idem, short []string, own int) (refusal error, ok bool) {
	if idem != nil && s.holdsRunning(req.HotelID, idem.Key) > own {
		return nil, false
	}
	return soldOutError(req.Stay, req.Quantity, short), true
}

func nightsOf(stay reservation.Stay) []string {
	dates := stay.Dates()
	nights := make([]string, len(dates))
	for i, d := range dates {
		nights[i] = d.String()
	}
	return nights
}

// UseSoldOutCache makes Hold refuse stays c knows to be sold out, and the
// store's freeing commits (cancel, expiry, inventory) drop what c knows of
// their hotel. Call it before serving.
func (s *Store) UseSoldOutCache(c *soldout.Cache) { s.soldOut = c }

// ForgetSoldOut drops what the sold-out cache knows of a hotel: another
// process committed something that may have freed rooms.
func (s *Store) ForgetSoldOut(hotelID string) {
	if s.soldOut != nil {
		s.soldOut.Forget(hotelID)
	}
}

// inFlight marks a hold's key as running in this process until the
// returned func is called.
func (s *Store) inFlight(hotelID, key string) func() {
	k := hotelID + "\x00" + key
	s.mu.Lock()
	s.inflight[k]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.inflight[k]--; s.inflight[k] == 0 {
			delete(s.inflight, k)
		}
		s.mu.Unlock()
	}
}

func (s *Store) holdRunning(hotelID, key string) bool { return s.holdsRunning(hotelID, key) > 0 }

// holdsRunning counts the holds with key running in this process.
func (s *Store) holdsRunning(hotelID, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight[hotelID+"\x00"+key]
}

// learnFromWin tells the sold-out cache, if the store has one, what a
// winning hold took, and teaches it the nights the win left without a room
// (left: what its take left of each night), as a refusal would have: the
// holds of the room type queued behind the win (hold_batch.go) and those
// arriving after it are refused without a transaction, instead of each
// batch of them finding out in the database first. gen is the hotel's
// generation when the hold began, so a freeing commit that returned
// meanwhile is never undone.
func (s *Store) learnFromWin(req reservation.HoldRequest, left []reservation.NightCount, gen uint64) {
	if s.soldOut == nil {
		return
	}
	s.soldOut.Taken(req.HotelID, req.RoomTypeID, nightsOf(req.Stay))
	var full []string
	for _, n := range left {
		if n.Available <= 0 {
			full = append(full, n.Night)
		}
	}
	if len(full) > 0 {
		s.soldOut.Learn(req.HotelID, req.RoomTypeID, full, 1, gen)
	}
}

// replay answers a hold whose key was claimed already with the stored answer.
func (s *Store) replay(ctx context.Context, partitionID string, idem *berth.Idem) (berth.Response, error) {
	replay, err := storedResponse(ctx, s.db.pool, partitionID, idem)
	if err != nil {
		return berth.Response{}, err
	}
	return *replay, nil
}
