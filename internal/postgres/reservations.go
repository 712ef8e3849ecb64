package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// Lock order of a hotel partition (every transaction follows it, so none
// deadlocks): the placement row, the idempotency key, the reservation row,
// then room_inventory nights by (room type, night) ascending.

// takeNights adds qty to every night of the stay in one conditional UPDATE,
// locking the nights in ascending date order first. It returns the nights it
// took; fewer than the stay's nights means some lacked rooms (or were not
// loaded), and the caller must give the taken ones back or roll back.
//
// The precheck reads the committed state without locking: when it already
// shows a night short of rooms, no lock is taken and nothing is waited for,
// so in a flash sale the losers who arrive after the last room went answer at
// once instead of queueing on the hot row. Rejecting on a committed snapshot
// is safe (it can only refuse, never oversell); a request that passes the
// precheck still decides under the lock, where the UPDATE re-evaluates the
// limit against the latest row.
const takeNightsSQL = `
WITH precheck AS (
    SELECT count(*) = $7 AS ok FROM room_inventory
    WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $3 AND night < $4
      AND reserved + $5 <= sell_limit
),
locked AS (
    SELECT night FROM room_inventory
    WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $3 AND night < $4
      AND (SELECT ok FROM precheck)
    ORDER BY night
    FOR UPDATE
)
UPDATE room_inventory AS i SET reserved = i.reserved + $5
FROM locked
WHERE i.hotel_id = $1 AND i.room_type_id = $2 AND i.night = locked.night
  AND i.reserved + $5 <= i.sell_limit
RETURNING i.night, now() + $6 * INTERVAL '1 microsecond', now(),
    (SELECT price_cents FROM room_types WHERE hotel_id = $1 AND room_type_id = $2),
    (SELECT currency FROM room_types WHERE hotel_id = $1 AND room_type_id = $2)`

// releaseNightsSQL gives qty back on the given nights, ascending.
const releaseNightsSQL = `
WITH locked AS (
    SELECT night FROM room_inventory
    WHERE hotel_id = $1 AND room_type_id = $2 AND night = ANY($3::DATE[])
    ORDER BY night
    FOR UPDATE
)
UPDATE room_inventory AS i SET reserved = i.reserved - $4
FROM locked
WHERE i.hotel_id = $1 AND i.room_type_id = $2 AND i.night = locked.night`

type taken struct {
	nights    []time.Time
	expiresAt time.Time
	now       time.Time
	price     int64
	currency  string
}

func takeNights(ctx context.Context, tx pgx.Tx, hotelID, roomTypeID string, stay reservation.Stay, qty int, ttl time.Duration) (taken, error) {
	var t taken
	rows, err := tx.Query(ctx, takeNightsSQL, hotelID, roomTypeID, stay.CheckIn.Time(), stay.CheckOut.Time(), qty, ttl.Microseconds(), stay.Nights())
	if err != nil {
		return t, fmt.Errorf("take nights: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var night time.Time
		if err := rows.Scan(&night, &t.expiresAt, &t.now, &t.price, &t.currency); err != nil {
			return t, fmt.Errorf("take nights: %w", err)
		}
		t.nights = append(t.nights, night)
	}
	if err := rows.Err(); err != nil {
		return t, fmt.Errorf("take nights: %w", err)
	}
	return t, nil
}

// takeAllNights takes every night of the stay or none: when any night lacks
// rooms, it gives back the ones it took and returns sold_out naming the
// nights that failed. The transaction still holds those locks, so nobody saw
// the partial take.
func takeAllNights(ctx context.Context, tx pgx.Tx, hotelID, roomTypeID string, stay reservation.Stay, qty int, ttl time.Duration) (taken, error) {
	t, err := takeNights(ctx, tx, hotelID, roomTypeID, stay, qty, ttl)
	if err != nil {
		return t, err
	}
	if len(t.nights) == stay.Nights() {
		return t, nil
	}
	got := map[string]bool{}
	for _, n := range t.nights {
		got[reservation.DateOf(n).String()] = true
	}
	if len(t.nights) == 0 {
		// Nothing taken (the precheck refused): name the nights that lack
		// rooms from the committed state, without locks.
		rows, err := tx.Query(ctx, `SELECT night FROM room_inventory
			WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $3 AND night < $4 AND reserved + $5 <= sell_limit`,
			hotelID, roomTypeID, stay.CheckIn.Time(), stay.CheckOut.Time(), qty)
		if err != nil {
			return t, fmt.Errorf("read nights: %w", err)
		}
		for rows.Next() {
			var night time.Time
			if err := rows.Scan(&night); err != nil {
				rows.Close()
				return t, fmt.Errorf("read nights: %w", err)
			}
			got[reservation.DateOf(night).String()] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t, fmt.Errorf("read nights: %w", err)
		}
		if len(got) == stay.Nights() {
			// Rooms came back between the two reads: nothing failed for
			// good, but this request lost its turn; answer sold out for the
			// night it could not take rather than retrying silently.
			got = map[string]bool{}
		}
	}
	failed := []string{}
	for _, d := range stay.Dates() {
		if !got[d.String()] {
			failed = append(failed, d.String())
		}
	}
	if len(t.nights) > 0 {
		if _, err := tx.Exec(ctx, releaseNightsSQL, hotelID, roomTypeID, t.nights, qty); err != nil {
			return t, fmt.Errorf("give back nights: %w", err)
		}
	}
	return t, &berth.Error{Code: berth.CodeSoldOut,
		Detail: fmt.Sprintf("%d of %d night(s) lack %d room(s)", len(failed), stay.Nights(), qty),
		Extra:  map[string]any{"nights": failed}}
}

func releaseStay(ctx context.Context, tx pgx.Tx, r reservation.Reservation) error {
	dates := make([]time.Time, 0, r.Stay().Nights())
	for _, d := range r.Stay().Dates() {
		dates = append(dates, d.Time())
	}
	tag, err := tx.Exec(ctx, releaseNightsSQL, r.HotelID, r.RoomTypeID, dates, r.Quantity)
	if err != nil {
		return fmt.Errorf("release nights: %w", err)
	}
	if int(tag.RowsAffected()) != len(dates) {
		return fmt.Errorf("release nights of %s: %d of %d nights found", r.ID, tag.RowsAffected(), len(dates))
	}
	return nil
}

// Hold takes every night of the stay now and records a held reservation that
// expires after the store's hold TTL (database time).
func (s *Store) Hold(ctx context.Context, req reservation.HoldRequest, idem *berth.Idem) (berth.Response, error) {
	return s.write(ctx, berth.KindHotel, req.HotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		t, err := takeAllNights(ctx, tx, req.HotelID, req.RoomTypeID, req.Stay, req.Quantity, s.holdTTL)
		if berth.ErrorCode(err) == berth.CodeSoldOut && len(t.nights) == 0 {
			// Nothing taken: tell an unknown room type from a sold-out one.
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM room_types WHERE hotel_id = $1 AND room_type_id = $2)`,
				req.HotelID, req.RoomTypeID).Scan(&exists); err != nil {
				return nil, fmt.Errorf("read room type: %w", err)
			}
			if !exists {
				return nil, berth.Errorf(berth.CodeNotFound, "room type %s not found", req.RoomTypeID)
			}
		}
		if err != nil {
			return nil, err
		}
		r := heldReservation(req, t)
		b.Queue(insertReservationSQL,
			r.HotelID, r.ID, s.region, r.RoomTypeID, r.GuestID, r.CheckIn.Time(), r.CheckOut.Time(),
			r.Quantity, string(r.Status), r.HoldExpiresAt, r.TotalPriceCents, r.Currency, r.ContactEmail, r.ContactPhone, r.CreatedAt)
		return r, queueEvents(ctx, b, s.region, reservationEvent(reservation.EventHeld, r))
	})
}

// heldReservation is the reservation a hold records once its nights are taken.
func heldReservation(req reservation.HoldRequest, t taken) reservation.Reservation {
	return reservation.Reservation{
		ID: req.ReservationID, HotelID: req.HotelID, RoomTypeID: req.RoomTypeID, GuestID: req.GuestID,
		CheckIn: req.Stay.CheckIn, CheckOut: req.Stay.CheckOut, Quantity: req.Quantity,
		Status: reservation.StatusHeld, HoldExpiresAt: t.expiresAt.UTC(),
		TotalPriceCents: t.price * int64(req.Quantity) * int64(req.Stay.Nights()), Currency: t.currency,
		ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone,
		Version: 1, CreatedAt: t.now.UTC(), UpdatedAt: t.now.UTC(),
	}
}

// insertReservationSQL records a new held reservation.
const insertReservationSQL = `INSERT INTO reservations (hotel_id, reservation_id, home_region, room_type_id, guest_id, check_in, check_out,
		quantity, status, hold_expires_at, total_price_cents, currency, contact_email, contact_phone, version, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULLIF($13, ''), NULLIF($14, ''), 1, $15, $15)`

func reservationEvent(typ string, r reservation.Reservation) event {
	return event{kind: berth.KindHotel, partitionID: r.HotelID, typ: typ, aggregateID: r.ID, version: r.Version, data: r}
}

const reservationColumns = `reservation_id::TEXT, hotel_id::TEXT, room_type_id::TEXT, guest_id, check_in, check_out, quantity,
	status, hold_expires_at, total_price_cents, currency, COALESCE(payment_ref, ''), COALESCE(contact_email, ''),
	COALESCE(contact_phone, ''), version, created_at, updated_at`

func scanReservation(row pgx.Row) (reservation.Reservation, error) {
	var (
		r      reservation.Reservation
		ci, co time.Time
		qty    int32
		status string
	)
	err := row.Scan(&r.ID, &r.HotelID, &r.RoomTypeID, &r.GuestID, &ci, &co, &qty, &status, &r.HoldExpiresAt,
		&r.TotalPriceCents, &r.Currency, &r.PaymentRef, &r.ContactEmail, &r.ContactPhone, &r.Version, &r.CreatedAt, &r.UpdatedAt)
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
	return r, classify(err)
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

// setStatus queues the row update of a transition and bumps the version.
func setStatus(b *pgx.Batch, r *reservation.Reservation, to reservation.Status, now time.Time) {
	r.Status, r.Version, r.UpdatedAt = to, r.Version+1, now
	b.Queue(`UPDATE reservations SET status = $3, payment_ref = NULLIF($4, ''), hold_expires_at = $5, version = $6, updated_at = $7
		WHERE hotel_id = $1 AND reservation_id = $2`,
		r.HotelID, r.ID, string(r.Status), r.PaymentRef, r.HoldExpiresAt, r.Version, r.UpdatedAt)
}

func dbNow(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return now, fmt.Errorf("read database time: %w", err)
	}
	return now.UTC(), nil
}

// Confirm confirms a reservation. authorize sees the reservation's guest
// inside the transaction and returns a forbidden error or nil. A held reservation — even one whose hold
// lapsed but which the sweeper has not expired yet — still owns its nights
// and is confirmed at once. An expired one tries to take every night again;
// if it cannot, it stays expired, a refund_requested event is written and
// the answer is 409 hold_expired (committed, so the refund is not lost).
func (s *Store) Confirm(ctx context.Context, hotelID, reservationID, paymentRef string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error) {
	return s.write(ctx, berth.KindHotel, hotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		r, err := lockReservation(ctx, tx, hotelID, reservationID)
		if err != nil {
			return nil, err
		}
		if err := authorize(r.GuestID); err != nil {
			return nil, err
		}
		switch reservation.OnConfirm(r.Status) {
		case reservation.ConfirmAlready:
			return r, nil
		case reservation.ConfirmRefuse:
			return r, berth.Errorf(berth.CodeInvalidState, "a %s reservation cannot be confirmed", r.Status)
		case reservation.ConfirmNow:
			now, err := dbNow(ctx, tx)
			if err != nil {
				return nil, err
			}
			r.PaymentRef = paymentRef
			setStatus(b, &r, reservation.StatusConfirmed, now)
			return r, queueEvents(ctx, b, s.region, reservationEvent(reservation.EventConfirmed, r))
		}
		// The hold lapsed and the sweeper gave the nights back: take them again.
		t, err := takeAllNights(ctx, tx, hotelID, r.RoomTypeID, r.Stay(), r.Quantity, 0)
		if berth.ErrorCode(err) == berth.CodeSoldOut {
			now, err := dbNow(ctx, tx)
			if err != nil {
				return nil, err
			}
			setStatus(b, &r, reservation.StatusExpired, now)
			refund := map[string]any{"reservation": r, "payment_ref": paymentRef, "amount_cents": r.TotalPriceCents,
				"currency": r.Currency, "reason": "hold_expired"}
			if err := queueEvents(ctx, b, s.region, event{kind: berth.KindHotel, partitionID: hotelID,
				typ: reservation.EventRefundRequested, aggregateID: r.ID, version: r.Version, data: refund}); err != nil {
				return nil, err
			}
			return r, &berth.Error{Code: berth.CodeHoldExpired,
				Detail: "the hold lapsed and the rooms were sold meanwhile; a refund was requested"}
		}
		if err != nil {
			return nil, err
		}
		r.PaymentRef = paymentRef
		setStatus(b, &r, reservation.StatusConfirmed, t.now.UTC())
		return r, queueEvents(ctx, b, s.region, reservationEvent(reservation.EventConfirmed, r))
	})
}

// Cancel cancels a live reservation and gives its nights back.
func (s *Store) Cancel(ctx context.Context, hotelID, reservationID string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error) {
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
		if err := releaseStay(ctx, tx, r); err != nil {
			return nil, err
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		setStatus(b, &r, reservation.StatusCancelled, now)
		return r, queueEvents(ctx, b, s.region, reservationEvent(reservation.EventCancelled, r))
	})
}
