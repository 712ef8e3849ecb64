package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Every transaction here takes its locks in the hotel lock order of
// docs/adr/0003-lock-order.md (the one place it is written down).

// takeStaySQL adds qty to every night of the stay that is homed in region $6
// and has the rooms, in one statement (a locking read and a conditional
// UPDATE), and returns the nights it
// took with the room type's price and the database time. Fewer rows than the
// stay's nights means some night lacked rooms, was not loaded, or is homed
// elsewhere (the partition moved): the caller rolls back or gives the taken
// nights back, and finds out which.
//
// The nights are locked in ascending date order — the partition's lock
// order — by the locking read l (its sort runs before its locks), not by
// the UPDATE's scan: on a small table the planner scans the heap, where a
// night's latest version can sit before an earlier night's, and a take
// locking in heap order deadlocked with a cancel releasing the same nights
// in date order (TestTakesLockNightsInDateOrder). A night whose committed
// state already lacks the rooms is skipped by both without taking or
// waiting for its lock, so the losers who arrive after the last room went
// are answered at once; a night
// a concurrent hold is taking is waited for and re-evaluated against the
// latest row (READ COMMITTED), which can only refuse, never oversell. The
// home_region condition is the fence: a move re-homes these rows in its own
// transaction, so a hold either commits first (and moves with them) or finds
// them re-homed.
const takeStaySQL = `
WITH l AS (
    SELECT night FROM room_inventory
    WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $3 AND night < $4
      AND home_region = $6 AND reserved + $5 <= sell_limit
    ORDER BY night
    FOR NO KEY UPDATE
)
UPDATE room_inventory AS i SET reserved = i.reserved + $5, version = i.version + 1
FROM l, room_types AS rt
WHERE i.hotel_id = $1 AND i.room_type_id = $2 AND i.night >= $3 AND i.night < $4 AND i.night = l.night
  AND i.home_region = $6 AND i.reserved + $5 <= i.sell_limit
  AND rt.hotel_id = $1 AND rt.room_type_id = $2
RETURNING i.night, rt.price_cents, rt.currency, now(), i.sell_limit - i.reserved, i.version`

// nightsWithRoomsSQL lists the nights of a stay that have qty rooms by the
// committed state, without locks, and says whether the room type exists: what
// a refused hold names in its answer.
const nightsWithRoomsSQL = `
SELECT EXISTS (SELECT 1 FROM room_types WHERE hotel_id = $1 AND room_type_id = $2),
       ARRAY(SELECT night FROM room_inventory
             WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $3 AND night < $4 AND reserved + $5 <= sell_limit
             ORDER BY night)`

type taken struct {
	nights    []time.Time
	counts    []reservation.NightCount // what is left of each night taken
	expiresAt time.Time
	now       time.Time
	price     int64
	currency  string
}

func takeStay(ctx context.Context, tx pgx.Tx, region, hotelID, roomTypeID string, stay reservation.Stay, qty int) (taken, error) {
	var t taken
	rows, err := tx.Query(ctx, takeStaySQL, hotelID, roomTypeID, stay.CheckIn.Time(), stay.CheckOut.Time(), qty, region)
	if err != nil {
		return t, fmt.Errorf("take nights: %w", err)
	}
	defer rows.Close()
	var row nightRow
	for rows.Next() {
		if err := row.scan(rows, false); err != nil {
			return t, fmt.Errorf("take nights: %w", err)
		}
		t.add(&row, stay.Nights())
	}
	if err := rows.Err(); err != nil {
		return t, fmt.Errorf("take nights: %w", err)
	}
	return t, nil
}

// nightRow is a row of takeStaySQL and, with held, the guest's new hold
// count that takeHeldStaySQL returns after it (NULL: a limit refused).
// Its rows are scanned into the same destinations, made on the first row,
// so a night costs no allocations of its own on the hold's path.
type nightRow struct {
	night, now time.Time
	price      int64
	currency   string
	left       int32
	version    int64
	holds      pgtype.Int4
	dest       []any
}

func (r *nightRow) scan(rows pgx.Rows, held bool) error {
	if r.dest == nil {
		r.dest = []any{&r.night, &r.price, &r.currency, &r.now, &r.left, &r.version, &r.holds}
		if !held {
			r.dest = r.dest[:6]
		}
	}
	return rows.Scan(r.dest...)
}

// add adds the night of row to t, which is to take nights nights.
func (t *taken) add(row *nightRow, nights int) {
	if t.nights == nil {
		t.nights, t.counts = make([]time.Time, 0, nights), make([]reservation.NightCount, 0, nights)
	}
	t.price, t.currency, t.now = row.price, row.currency, row.now
	t.nights = append(t.nights, row.night)
	t.counts = append(t.counts, reservation.NightCount{Night: reservation.DateOf(row.night).String(), Available: int(row.left),
		Version: row.version})
}

// soldOut is the answer to a stay that could not be taken: the nights that
// lacked rooms, from what the take got (got) or, when it got nothing, from
// the committed state read afterwards.
func soldOut(stay reservation.Stay, qty int, got []time.Time) error {
	return soldOutError(stay, qty, failedNights(stay, got))
}

// failedNights are the nights of the stay not in got; all of them when got
// has every night (rooms came back between the take and the read: nothing
// failed for good, but the request lost its turn, and is answered sold out
// for every night rather than retried silently).
func failedNights(stay reservation.Stay, got []time.Time) []string {
	have := map[string]bool{}
	for _, n := range got {
		have[reservation.DateOf(n).String()] = true
	}
	failed := []string{}
	for _, d := range stay.Dates() {
		if !have[d.String()] {
			failed = append(failed, d.String())
		}
	}
	if len(failed) == 0 {
		for _, d := range stay.Dates() {
			failed = append(failed, d.String())
		}
	}
	return failed
}

// soldOutError is the 409 sold_out answer naming the nights that failed.
func soldOutError(stay reservation.Stay, qty int, failed []string) error {
	return &berth.Error{Code: berth.CodeSoldOut,
		Detail: fmt.Sprintf("%d of %d night(s) lack %d room(s)", len(failed), stay.Nights(), qty),
		Extra:  map[string]any{"nights": failed}}
}

// takeAllNights takes every night of the stay or none, inside a transaction
// that holds the partition's fence: when any night lacks rooms, it gives
// back the ones it took (the transaction still holds their locks, so nobody
// saw the partial take) and returns sold_out naming the nights that failed.
func takeAllNights(ctx context.Context, tx pgx.Tx, region, hotelID, roomTypeID string, stay reservation.Stay, qty int) (taken, error) {
	t, err := takeStay(ctx, tx, region, hotelID, roomTypeID, stay, qty)
	if err != nil || len(t.nights) == stay.Nights() {
		return t, err
	}
	got := t.nights
	if len(t.nights) > 0 {
		if _, err := tx.Exec(ctx, releaseNightsSQL, hotelID, roomTypeID, t.nights, qty); err != nil {
			return t, fmt.Errorf("give back nights: %w", err)
		}
	} else {
		var exists bool
		if err := tx.QueryRow(ctx, nightsWithRoomsSQL, hotelID, roomTypeID, stay.CheckIn.Time(), stay.CheckOut.Time(), qty).
			Scan(&exists, &got); err != nil {
			return t, fmt.Errorf("read nights: %w", err)
		}
	}
	return t, soldOut(stay, qty, got)
}

// releaseNightsSQL gives qty back on the given nights, ascending.
const releaseNightsSQL = `
WITH locked AS (
    SELECT night FROM room_inventory
    WHERE hotel_id = $1 AND room_type_id = $2 AND night = ANY($3::DATE[])
    ORDER BY night
    FOR UPDATE
)
UPDATE room_inventory AS i SET reserved = i.reserved - $4, version = i.version + 1
FROM locked
WHERE i.hotel_id = $1 AND i.room_type_id = $2 AND i.night = locked.night
RETURNING i.night, GREATEST(i.sell_limit - i.reserved, 0), i.version`

// releaseStay gives a reservation's nights back and returns what is left of
// each, for its inventory.changed event.
func releaseStay(ctx context.Context, tx pgx.Tx, r reservation.Reservation) ([]reservation.NightCount, error) {
	dates := make([]time.Time, 0, r.Stay().Nights())
	for _, d := range r.Stay().Dates() {
		dates = append(dates, d.Time())
	}
	counts, err := nightCounts(tx.Query(ctx, releaseNightsSQL, r.HotelID, r.RoomTypeID, dates, r.Quantity))
	if err != nil {
		return nil, fmt.Errorf("release nights: %w", err)
	}
	if len(counts) != len(dates) {
		return nil, fmt.Errorf("release nights of %s: %d of %d nights found", r.ID, len(counts), len(dates))
	}
	return counts, nil
}

// reservationInventoryEvent is the event of a reservation whose
// transaction changed its nights: the reservation with what is left of each
// night (reservation.WithInventory).
func reservationInventoryEvent(typ string, r reservation.Reservation, counts []reservation.NightCount) event {
	e := reservationEvent(typ, r)
	if len(counts) == 0 {
		return e
	}
	e.data = reservation.WithInventory{Reservation: r,
		Inventory: &reservation.InventoryChange{HotelID: r.HotelID, RoomTypeID: r.RoomTypeID, Nights: counts}}
	return e
}

// heldReservation is the reservation a hold records once its nights are taken.
func heldReservation(req reservation.HoldRequest, t taken) reservation.Reservation {
	return reservation.Reservation{
		ID: req.ReservationID, HotelID: req.HotelID, RoomTypeID: req.RoomTypeID, GuestID: req.GuestID,
		CheckIn: req.Stay.CheckIn, CheckOut: req.Stay.CheckOut, Quantity: req.Quantity,
		Status: reservation.StatusHeld, HoldExpiresAt: t.expiresAt.UTC(),
		TotalPriceCents: t.price * int64(req.Quantity) * int64(req.Stay.Nights()), Currency: t.currency,
		ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone, ContactPushToken: req.ContactPushToken,
		Version: 1, CreatedAt: t.now.UTC(), UpdatedAt: t.now.UTC(),
	}
}

// insertReservationSQL records a new held reservation.
const insertReservationSQL = `INSERT INTO reservations (hotel_id, reservation_id, home_region, room_type_id, guest_id, check_in, check_out,
		quantity, status, hold_expires_at, total_price_cents, currency, contact_email, contact_phone, version, created_at, updated_at,
		contact_push_token)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULLIF($13, ''), NULLIF($14, ''), 1, $15, $15, NULLIF($16, ''))`

func queueInsertReservation(b *pgx.Batch, region string, r reservation.Reservation) {
	b.Queue(insertReservationSQL, r.HotelID, r.ID, region, r.RoomTypeID, r.GuestID, r.CheckIn.Time(), r.CheckOut.Time(),
		r.Quantity, string(r.Status), r.HoldExpiresAt, r.TotalPriceCents, r.Currency, r.ContactEmail, r.ContactPhone, r.CreatedAt,
		r.ContactPushToken)
}

func reservationEvent(typ string, r reservation.Reservation) event {
	return event{kind: berth.KindHotel, partitionID: r.HotelID, typ: typ, aggregateID: r.ID, version: r.Version, data: r}
}

const reservationColumns = `reservation_id::TEXT, hotel_id::TEXT, room_type_id::TEXT, guest_id, check_in, check_out, quantity,
	status, hold_expires_at, total_price_cents, currency, COALESCE(payment_ref, ''), COALESCE(contact_email, ''),
	COALESCE(contact_phone, ''), version, created_at, updated_at, released_from, COALESCE(waitlist_entry_id::TEXT, ''),
	COALESCE(upgraded_from::TEXT, ''), COALESCE(walk_hotel_id::TEXT, ''), COALESCE(walk_reservation_id::TEXT, ''),
	COALESCE(relocated_from_hotel_id::TEXT, ''), COALESCE(relocated_from_reservation_id::TEXT, ''), COALESCE(contact_push_token, '')`

func scanReservation(row pgx.Row) (reservation.Reservation, error) {
	var (
		r        reservation.Reservation
		ci, co   time.Time
		qty      int32
		status   string
		released *time.Time
		walk     reservation.StayRef
		from     reservation.StayRef
	)
	err := row.Scan(&r.ID, &r.HotelID, &r.RoomTypeID, &r.GuestID, &ci, &co, &qty, &status, &r.HoldExpiresAt,
		&r.TotalPriceCents, &r.Currency, &r.PaymentRef, &r.ContactEmail, &r.ContactPhone, &r.Version, &r.CreatedAt, &r.UpdatedAt,
		&released, &r.WaitlistEntryID, &r.UpgradedFrom, &walk.HotelID, &walk.ReservationID, &from.HotelID, &from.ReservationID,
		&r.ContactPushToken)
	if walk.ReservationID != "" {
		r.Walk = &walk
	}
	if from.ReservationID != "" {
		r.RelocatedFrom = &from
	}
	if released != nil {
		d := reservation.DateOf(*released)
		r.ReleasedFrom = &d
	}
	r.CheckIn, r.CheckOut, r.Quantity, r.Status = reservation.DateOf(ci), reservation.DateOf(co), int(qty), reservation.Status(status)
	r.HoldExpiresAt, r.CreatedAt, r.UpdatedAt = r.HoldExpiresAt.UTC(), r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, err
}

// GetReservation reads a reservation.
func (s *Store) GetReservation(ctx context.Context, hotelID, reservationID string) (reservation.Reservation, error) {
	r, err := scanReservation(s.db.pool.QueryRow(ctx,
		`SELECT `+reservationColumns+` FROM reservations WHERE hotel_id = $1 AND reservation_id = $2`, hotelID, reservationID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, berth.Errorf(berth.CodeNotFound, "reservation %s not found", reservationID)
	}
	if err != nil {
		return r, classify(err)
	}
	return r, s.addRooms(ctx, s.db.pool, []*reservation.Reservation{&r})
}

func lockReservation(ctx context.Context, tx pgx.Tx, hotelID, reservationID string) (reservation.Reservation, error) {
	r, err := scanReservation(tx.QueryRow(ctx,
		`SELECT `+reservationColumns+` FROM reservations WHERE hotel_id = $1 AND reservation_id = $2 FOR UPDATE`,
		hotelID, reservationID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, berth.Errorf(berth.CodeNotFound, "reservation %s not found", reservationID)
	}
	if err != nil {
		return r, fmt.Errorf("lock reservation: %w", err)
	}
	return r, nil
}

// setStatus queues the row update of a transition and bumps the version,
// and, for a waitlist offer, the change of its entry (queueSettleOffer).
func setStatus(b *pgx.Batch, r *reservation.Reservation, to reservation.Status, now time.Time) {
	r.Status, r.Version, r.UpdatedAt = to, r.Version+1, now
	b.Queue(`UPDATE reservations SET status = $3, payment_ref = NULLIF($4, ''), hold_expires_at = $5, version = $6, updated_at = $7
		WHERE hotel_id = $1 AND reservation_id = $2`,
		r.HotelID, r.ID, string(r.Status), r.PaymentRef, r.HoldExpiresAt, r.Version, r.UpdatedAt)
	// A waitlist offer settles its entry in the same transaction.
	queueSettleOffer(b, *r)
}

func dbNow(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return now, fmt.Errorf("read database time: %w", err)
	}
	return now.UTC(), nil
}

// Confirm confirms a reservation paid for by pay. authorize sees the
// reservation's guest inside the transaction and returns a forbidden error
// or nil.
//
// The payment is decided against the locked row (payments.Payment.Settles):
// the caller verified it with the provider before the transaction (no
// network call in here), and this check makes the state change conditional
// on exactly the amount and currency due. A payment that does not settle is
// 402 payment_required and changes nothing — except that money a provider
// reports as taken (the webhook) is given back: a refund_requested event.
//
// A held reservation — even one whose hold lapsed but which the sweeper has
// not expired yet — still owns its nights and is confirmed at once. An
// expired one tries to take every night again; if it cannot, it stays
// expired, a refund_requested event is written and the answer is 409
// hold_expired (committed, so the refund is not lost).
func (s *Store) Confirm(ctx context.Context, hotelID, reservationID string, pay payments.Payment, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error) {
	return s.write(ctx, berth.KindHotel, hotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		r, err := lockReservation(ctx, tx, hotelID, reservationID)
		if err != nil {
			return nil, err
		}
		if err := authorize(r.GuestID); err != nil {
			return nil, err
		}
		due := payments.Due{Kind: string(berth.KindHotel), PartitionID: hotelID, ReservationID: r.ID,
			AmountCents: r.TotalPriceCents, Currency: r.Currency}
		refund := func(reason string) error {
			return queueEvents(ctx, b, s.region, refundEvent(berth.KindHotel, hotelID, r.ID, r.Version,
				"reservation", r, pay.Ref, pay.AmountCents, pay.Currency, reason))
		}
		switch reservation.OnConfirm(r.Status) {
		case reservation.ConfirmAlready:
			return r, unappliedPayment(pay, r.PaymentRef, refund)
		case reservation.ConfirmRefuse:
			return r, refusedPayment(pay, refund, fmt.Sprintf("a %s reservation cannot be confirmed", r.Status))
		}
		if err := pay.Settles(due); err != nil {
			return r, mismatchedPayment(pay, err, refund)
		}
		if reservation.OnConfirm(r.Status) == reservation.ConfirmNow {
			now, err := dbNow(ctx, tx)
			if err != nil {
				return nil, err
			}
			queueReleaseGuestHold(b, r)
			r.PaymentRef = pay.Ref
			setStatus(b, &r, reservation.StatusConfirmed, now)
			queuePaymentAudit(b, s.region, due, pay)
			return r, queueEvents(ctx, b, s.region, reservationEvent(reservation.EventConfirmed, r))
		}
		// The hold lapsed and the sweeper gave the nights back: take them again.
		t, err := takeAllNights(ctx, tx, s.region, hotelID, r.RoomTypeID, r.Stay(), r.Quantity)
		if berth.ErrorCode(err) == berth.CodeSoldOut {
			now, err := dbNow(ctx, tx)
			if err != nil {
				return nil, err
			}
			setStatus(b, &r, reservation.StatusExpired, now)
			if pay.TookMoney() {
				if err := queueEvents(ctx, b, s.region, refundEvent(berth.KindHotel, hotelID, r.ID, r.Version,
					"reservation", r, pay.Ref, r.TotalPriceCents, r.Currency, "hold_expired")); err != nil {
					return nil, err
				}
			}
			return r, &berth.Error{Code: berth.CodeHoldExpired,
				Detail: "the hold lapsed and the rooms were sold meanwhile; a refund was requested"}
		}
		if err != nil {
			return nil, err
		}
		r.PaymentRef = pay.Ref
		setStatus(b, &r, reservation.StatusConfirmed, t.now.UTC())
		queuePaymentAudit(b, s.region, due, pay)
		return r, queueEvents(ctx, b, s.region, reservationInventoryEvent(reservation.EventConfirmed, r, t.counts))
	})
}

// Cancel cancels a live reservation and gives its nights back.
func (s *Store) Cancel(ctx context.Context, hotelID, reservationID string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error) {
	// Rooms may come back: what the sold-out cache knows of the hotel goes
	// the moment the cancel returns (its commit happened before).
	defer s.ForgetSoldOut(hotelID)
	return s.write(ctx, berth.KindHotel, hotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		r, err := lockReservation(ctx, tx, hotelID, reservationID)
		if err != nil {
			return nil, err
		}
		if err := authorize(r.GuestID); err != nil {
			return nil, err
		}
		if !reservation.CanCancel(r.Status) {
			return r, berth.Errorf(berth.CodeInvalidState, "a %s reservation cannot be cancelled", r.Status)
		}
		counts, err := releaseStay(ctx, tx, r)
		if err != nil {
			return nil, err
		}
		if r.Status == reservation.StatusHeld {
			queueReleaseGuestHold(b, r) // after the nights: the lock order
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		setStatus(b, &r, reservation.StatusCancelled, now)
		return r, queueEvents(ctx, b, s.region, reservationInventoryEvent(reservation.EventCancelled, r, counts))
	})
}
