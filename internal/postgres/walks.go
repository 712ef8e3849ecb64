package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// Walks (docs/adr/0012-walks.md): what the desk does when a check-in finds
// no room of the booked type. An upgrade stays in the hotel's partition and
// is one transaction. A relocation to a sister hotel is a saga of fenced
// writes, one partition each, linked by outbox events (internal/walk drives
// it): Relocate, then HoldWalk at the target, then FinishWalk back home.
// Every step takes the locks of docs/adr/0003-lock-order.md in its own
// partition and never a row of the other.

// withWalkOptions adds the desk's options to a no_room_free refusal of r:
// other room types free for every night, and sister hotels with rooms. The
// options are read from the committed state (a hint for the desk, never a
// promise: the upgrade or relocation decides again under its locks).
func withWalkOptions(ctx context.Context, q querier, r reservation.Reservation, err error) error {
	var be *berth.Error
	if !errors.As(err, &be) || be.Code != berth.CodeNoRoomFree {
		return err
	}
	opts, oerr := walkOptions(ctx, q, r)
	if oerr != nil {
		return oerr
	}
	if be.Extra == nil {
		be.Extra = map[string]any{}
	}
	be.Extra["options"] = opts
	return be
}

// upgradeOptionsSQL lists the other room types of the hotel, at least as
// big as the booked one, with what is left over the stay in inventory (NULL
// when a night is not loaded) and how many of their rooms are physically
// free for every night.
const upgradeOptionsSQL = `
SELECT rt.room_type_id::TEXT, rt.name, rt.max_guests,
       (SELECT CASE WHEN count(*) = $5 THEN min(i.sell_limit - i.reserved) END FROM room_inventory i
         WHERE i.hotel_id = rt.hotel_id AND i.room_type_id = rt.room_type_id AND i.night >= $3 AND i.night < $4),
       (SELECT count(*) FROM rooms m
         WHERE m.hotel_id = rt.hotel_id AND m.room_type_id = rt.room_type_id
           AND NOT EXISTS (SELECT 1 FROM room_nights n WHERE n.hotel_id = m.hotel_id AND n.room_id = m.room_id
                           AND n.night >= $3 AND n.night < $4))
FROM room_types rt
WHERE rt.hotel_id = $1 AND rt.room_type_id <> $2
  AND rt.max_guests >= (SELECT max_guests FROM room_types WHERE hotel_id = $1 AND room_type_id = $2)
ORDER BY rt.price_cents, rt.room_type_id`

// relocationOptionsSQL lists room types of the hotel's sister hotels (same
// chain, same folded city) big enough for the booked type, with qty rooms
// left on every night of the stay.
const relocationOptionsSQL = `
SELECT h2.hotel_id::TEXT, h2.name, rt.room_type_id::TEXT, rt.name, rt.max_guests, rt.price_cents, rt.currency,
       min(i.sell_limit - i.reserved)
FROM hotels h
JOIN hotels h2 ON h2.chain = h.chain AND h2.city_key = h.city_key AND h2.hotel_id <> h.hotel_id
JOIN room_types rt ON rt.hotel_id = h2.hotel_id
JOIN room_inventory i ON i.hotel_id = rt.hotel_id AND i.room_type_id = rt.room_type_id AND i.night >= $2 AND i.night < $3
WHERE h.hotel_id = $1 AND h.chain IS NOT NULL
  AND rt.max_guests >= (SELECT max_guests FROM room_types WHERE hotel_id = $1 AND room_type_id = $6)
GROUP BY h2.hotel_id, h2.name, rt.room_type_id, rt.name, rt.max_guests, rt.price_cents, rt.currency
HAVING count(*) = $4 AND min(i.sell_limit - i.reserved) >= $5
ORDER BY rt.price_cents, h2.hotel_id, rt.room_type_id
LIMIT 10`

// walkOptions reads what the desk may do for r.
func walkOptions(ctx context.Context, q querier, r reservation.Reservation) (reservation.WalkOptions, error) {
	opts := reservation.WalkOptions{Upgrades: []reservation.UpgradeOption{}, Relocations: []reservation.RelocationOption{}}
	in, out, n := r.CheckIn.Time(), r.CheckOut.Time(), r.Stay().Nights()
	rows, err := q.Query(ctx, upgradeOptionsSQL, r.HotelID, r.RoomTypeID, in, out, n)
	if err != nil {
		return opts, fmt.Errorf("upgrade options: %w", err)
	}
	type up struct {
		o          reservation.UpgradeOption
		left       *int32
		freeRooms  int64
		maxGuestsI int32
	}
	ups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (up, error) {
		var u up
		err := row.Scan(&u.o.RoomTypeID, &u.o.Name, &u.maxGuestsI, &u.left, &u.freeRooms)
		u.o.MaxGuests = int(u.maxGuestsI)
		return u, err
	})
	if err != nil {
		return opts, fmt.Errorf("upgrade options: %w", err)
	}
	for _, u := range ups {
		if u.left == nil || int(*u.left) < r.Quantity || int(u.freeRooms) < r.Quantity {
			continue
		}
		u.o.Available = min(int(*u.left), int(u.freeRooms))
		opts.Upgrades = append(opts.Upgrades, u.o)
	}
	rows, err = q.Query(ctx, relocationOptionsSQL, r.HotelID, in, out, n, r.Quantity, r.RoomTypeID)
	if err != nil {
		return opts, fmt.Errorf("relocation options: %w", err)
	}
	opts.Relocations, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (reservation.RelocationOption, error) {
		var (
			o         reservation.RelocationOption
			mg, avail int32
		)
		err := row.Scan(&o.HotelID, &o.HotelName, &o.RoomTypeID, &o.Name, &mg, &o.PriceCents, &o.Currency, &avail)
		o.MaxGuests, o.Available = int(mg), int(avail)
		return o, err
	})
	if err != nil {
		return opts, fmt.Errorf("relocation options: %w", err)
	}
	if opts.Relocations == nil {
		opts.Relocations = []reservation.RelocationOption{}
	}
	return opts, nil
}

// WalkOptions answers what the desk may do for a confirmed stay: the same
// options a refused check-in carries.
func (s *Store) WalkOptions(ctx context.Context, hotelID, reservationID string) (reservation.WalkOptions, error) {
	r, err := s.GetReservation(ctx, hotelID, reservationID)
	if err != nil {
		return reservation.WalkOptions{}, err
	}
	opts, err := walkOptions(ctx, s.db.pool, r)
	return opts, classify(err)
}

// walkWindow checks, under r's lock, that the desk may walk r today.
func walkWindow(ctx context.Context, tx pgx.Tx, r reservation.Reservation) (time.Time, error) {
	loc, err := hotelZone(ctx, tx, r.HotelID)
	if err != nil {
		return time.Time{}, err
	}
	now, err := dbNow(ctx, tx)
	if err != nil {
		return now, err
	}
	today := reservation.LocalDate(now, loc)
	switch reservation.OnWalk(r.Status, r.Stay(), today) {
	case reservation.WalkRefuse:
		return now, berth.Errorf(berth.CodeInvalidState, "a %s reservation cannot be walked", r.Status)
	case reservation.WalkTooEarly:
		return now, berth.Errorf(berth.CodeInvalidState, "the stay begins on %s; it is %s at the hotel", r.CheckIn, today)
	case reservation.WalkOver:
		return now, berth.Errorf(berth.CodeInvalidState, "the stay ended on %s", r.CheckOut)
	}
	return now, nil
}

// restoreNightsSQL adds qty back to nights this transaction gave back
// earlier (and so still holds locked): the undo of a release when the
// upgrade it was part of is refused.
const restoreNightsSQL = `UPDATE room_inventory SET reserved = reserved + $4, version = version + 1
	WHERE hotel_id = $1 AND room_type_id = $2 AND night = ANY($3::DATE[])`

// Upgrade checks a confirmed guest in to rooms of another room type of the
// hotel, free of charge, for every night of the stay, all or none: the new
// type's nights are taken conditionally (never past their sell limit), the
// booked type's nights are given back, and rooms of the new type are
// assigned (picked by the desk, or chosen as a check-in chooses) — in one
// transaction of the hotel. When the new type lacks rooms on a night, the
// answer is 409 no_room_free with the options, and nothing changes.
//
// The two types' nights are locked in room type order (ADR 0003, step 4):
// whichever of the take and the release comes first by room_type_id runs
// first, and a refused take after the release restores it under the locks
// the release took.
func (s *Store) Upgrade(ctx context.Context, hotelID, reservationID, roomTypeID string, roomIDs []string, idem *berth.Idem) (berth.Response, error) {
	defer s.ForgetSoldOut(hotelID) // the booked type's nights come back
	return s.write(ctx, berth.KindHotel, hotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		r, err := lockReservation(ctx, tx, hotelID, reservationID)
		if err != nil {
			return nil, err
		}
		now, err := walkWindow(ctx, tx, r)
		if err != nil {
			return r, err
		}
		if roomTypeID == r.RoomTypeID {
			return r, berth.Errorf(berth.CodeInvalidState, "the stay is booked as that room type already: check it in")
		}
		var bigEnough bool
		err = tx.QueryRow(ctx, `SELECT t.max_guests >= b.max_guests FROM room_types t, room_types b
			WHERE t.hotel_id = $1 AND t.room_type_id = $2 AND b.hotel_id = $1 AND b.room_type_id = $3`,
			hotelID, roomTypeID, r.RoomTypeID).Scan(&bigEnough)
		if errors.Is(err, pgx.ErrNoRows) {
			return r, berth.Errorf(berth.CodeNotFound, "room type %s not found in hotel %s", roomTypeID, hotelID)
		}
		if err != nil {
			return nil, fmt.Errorf("read room types: %w", err)
		}
		if !bigEnough {
			return r, berth.Errorf(berth.CodeInvalidState, "room type %s takes fewer guests than the booked type", roomTypeID)
		}
		if len(roomIDs) > 0 && len(roomIDs) != r.Quantity {
			return r, berth.Errorf(berth.CodeInvalidState, "%d room(s) picked for %d booked", len(roomIDs), r.Quantity)
		}
		booked := r
		dates := make([]time.Time, 0, r.Stay().Nights())
		for _, d := range r.Stay().Dates() {
			dates = append(dates, d.Time())
		}
		var (
			released []reservation.NightCount
			took     taken
		)
		release := func() error {
			released, err = releaseStay(ctx, tx, booked)
			return err
		}
		refuse := func(cause error) error {
			if released != nil {
				if _, err := tx.Exec(ctx, restoreNightsSQL, hotelID, booked.RoomTypeID, dates, booked.Quantity); err != nil {
					return fmt.Errorf("restore nights: %w", err)
				}
			}
			return withWalkOptions(ctx, tx, booked, cause)
		}
		if booked.RoomTypeID < roomTypeID {
			if err := release(); err != nil {
				return nil, err
			}
		}
		took, err = takeAllNights(ctx, tx, s.region, hotelID, roomTypeID, r.Stay(), r.Quantity)
		var soldOut *berth.Error
		if errors.As(err, &soldOut) && soldOut.Code == berth.CodeSoldOut {
			return booked, refuse(berth.Errorf(berth.CodeNoRoomFree,
				"room type %s lacks %d room(s) on %v", roomTypeID, r.Quantity, soldOut.Extra["nights"]))
		}
		if err != nil {
			return nil, err
		}
		if released == nil {
			if err := release(); err != nil {
				return nil, err
			}
		}
		r.RoomTypeID, r.UpgradedFrom = roomTypeID, booked.RoomTypeID
		rooms, err := assignRooms(ctx, tx, s.region, r, roomIDs)
		if berth.ErrorCode(err) == berth.CodeNoRoomFree {
			if _, err := tx.Exec(ctx, releaseNightsSQL, hotelID, roomTypeID, took.nights, r.Quantity); err != nil {
				return nil, fmt.Errorf("give back nights: %w", err)
			}
			return booked, refuse(err)
		}
		if err != nil {
			return booked, err
		}
		b.Queue(`UPDATE reservations SET room_type_id = $3, upgraded_from = $4 WHERE hotel_id = $1 AND reservation_id = $2`,
			hotelID, r.ID, roomTypeID, booked.RoomTypeID)
		setStatus(b, &r, reservation.StatusCheckedIn, now)
		r.Rooms = rooms
		if err := queueEvents(ctx, b, s.region, reservationInventoryEvent(reservation.EventCheckedIn, r, took.counts)); err != nil {
			return nil, err
		}
		return r, queueInventory(ctx, b, s.region, hotelID, booked.RoomTypeID, released)
	})
}

// Relocate starts the walk of a confirmed guest to a sister hotel (same
// chain, same city): the first step of the saga, in the original hotel's
// transaction. The stay becomes walking and keeps its nights; walk.requested
// asks the target's home region to hold a stay under walkID (a fresh UUID
// the caller made before the transaction). roomTypeID ("" for any big
// enough) is the type the desk chose at the target.
func (s *Store) Relocate(ctx context.Context, hotelID, reservationID, toHotelID, roomTypeID, walkID string, idem *berth.Idem) (berth.Response, error) {
	return s.write(ctx, berth.KindHotel, hotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		r, err := lockReservation(ctx, tx, hotelID, reservationID)
		if err != nil {
			return nil, err
		}
		now, err := walkWindow(ctx, tx, r)
		if err != nil {
			return r, err
		}
		if toHotelID == hotelID {
			return r, berth.Errorf(berth.CodeInvalidState, "a relocation goes to another hotel; an upgrade stays here")
		}
		// The target is another partition: read, never locked, only to
		// refuse what can never work. Its own transaction decides.
		var sister, typeOK bool
		var minGuests int32
		err = tx.QueryRow(ctx, `SELECT h2.chain IS NOT NULL AND h2.chain = h.chain AND h2.city_key = h.city_key,
				($3 = '' OR EXISTS (SELECT 1 FROM room_types WHERE hotel_id = h2.hotel_id AND room_type_id::TEXT = $3)),
				(SELECT max_guests FROM room_types WHERE hotel_id = h.hotel_id AND room_type_id = $4)
			FROM hotels h, hotels h2 WHERE h.hotel_id = $1 AND h2.hotel_id = $2`,
			hotelID, toHotelID, roomTypeID, r.RoomTypeID).Scan(&sister, &typeOK, &minGuests)
		if errors.Is(err, pgx.ErrNoRows) {
			return r, berth.Errorf(berth.CodeNotFound, "hotel %s not found", toHotelID)
		}
		if err != nil {
			return nil, fmt.Errorf("read the target hotel: %w", err)
		}
		if !sister {
			return r, berth.Errorf(berth.CodeInvalidState, "hotel %s is not of this hotel's chain in its city", toHotelID)
		}
		if !typeOK {
			return r, berth.Errorf(berth.CodeNotFound, "room type %s not found in hotel %s", roomTypeID, toHotelID)
		}
		r.Walk = &reservation.StayRef{HotelID: toHotelID, ReservationID: walkID}
		b.Queue(`UPDATE reservations SET walk_hotel_id = $3, walk_reservation_id = $4 WHERE hotel_id = $1 AND reservation_id = $2`,
			hotelID, r.ID, toHotelID, walkID)
		setStatus(b, &r, reservation.StatusWalking, now)
		req := walkRequest(r, roomTypeID, int(minGuests))
		return r, queueEvents(ctx, b, s.region, reservationEvent(reservation.EventWalking, r),
			event{kind: berth.KindHotel, partitionID: hotelID, typ: reservation.EventWalkRequested, aggregateID: r.ID,
				version: r.Version, data: req})
	})
}

func walkRequest(r reservation.Reservation, roomTypeID string, minGuests int) reservation.WalkRequest {
	return reservation.WalkRequest{
		WalkID: r.Walk.ReservationID, ToHotelID: r.Walk.HotelID, RoomTypeID: roomTypeID,
		From:    reservation.StayRef{HotelID: r.HotelID, ReservationID: r.ID},
		GuestID: r.GuestID, CheckIn: r.CheckIn, CheckOut: r.CheckOut, Quantity: r.Quantity, MinGuests: minGuests,
		ContactEmail: r.ContactEmail, ContactPhone: r.ContactPhone, ContactPushToken: r.ContactPushToken,
	}
}

// insertRelocatedSQL records the stay a target hotel holds for a walked
// guest: confirmed, paid by the original hotel (payment_ref walk:<id>).
const insertRelocatedSQL = `INSERT INTO reservations (hotel_id, reservation_id, home_region, room_type_id, guest_id, check_in, check_out,
		quantity, status, hold_expires_at, total_price_cents, currency, payment_ref, contact_email, contact_phone, version,
		created_at, updated_at, relocated_from_hotel_id, relocated_from_reservation_id, contact_push_token)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'confirmed', $9, $10, $11, $12, NULLIF($13, ''), NULLIF($14, ''), 1, $9, $9, $15, $16,
		NULLIF($17, ''))`

// HoldWalk is the saga's step at the target hotel: hold a confirmed stay
// under the walk id in a fenced write of the target's partition, or record
// that it has no room, and answer the original hotel (walk.held or
// walk.refused). It is idempotent by the walk id: walk_outcomes keeps the
// one decision, and a replay re-sends that decision's answer without
// deciding again (the answer's consumer is idempotent too). A walk homed
// elsewhere is 421 misdirected: that region's consumer takes it.
func (s *Store) HoldWalk(ctx context.Context, req reservation.WalkRequest) error {
	defer s.ForgetSoldOut(req.ToHotelID)
	_, err := s.write(ctx, berth.KindHotel, req.ToHotelID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		out := reservation.WalkOutcome{WalkID: req.WalkID, From: req.From, GuestID: req.GuestID,
			To: reservation.StayRef{HotelID: req.ToHotelID, ReservationID: req.WalkID}}
		var outcome string
		err := tx.QueryRow(ctx, `SELECT outcome, amount_cents, currency, reason FROM walk_outcomes
			WHERE hotel_id = $1 AND walk_id = $2 FOR UPDATE`, req.ToHotelID, req.WalkID).Scan(&outcome, &out.Amount, &out.Curr, &out.Reason)
		switch {
		case err == nil:
			out.Held = outcome == "held"
			return nil, queueEvents(ctx, b, s.region, walkAnswer(out))
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("read walk outcome: %w", err)
		}
		types := []string{req.RoomTypeID}
		if req.RoomTypeID == "" {
			// Room type id order is the lock order of the nights (ADR 0003).
			if types, err = collectStrings(tx.Query(ctx, `SELECT room_type_id::TEXT FROM room_types
				WHERE hotel_id = $1 AND max_guests >= $2 ORDER BY room_type_id`, req.ToHotelID, req.MinGuests)); err != nil {
				return nil, fmt.Errorf("read room types: %w", err)
			}
		}
		var (
			t      taken
			typeID string
		)
		for _, id := range types {
			t, err = takeAllNights(ctx, tx, s.region, req.ToHotelID, id, req.Stay(), req.Quantity)
			if err == nil {
				typeID = id
				break
			}
			if berth.ErrorCode(err) != berth.CodeSoldOut {
				return nil, err
			}
		}
		if typeID == "" {
			out.Reason = "no room type of the hotel has the rooms for every night of the stay"
			b.Queue(`INSERT INTO walk_outcomes (hotel_id, walk_id, home_region, outcome, from_hotel_id, from_reservation_id, reason)
				VALUES ($1, $2, $3, 'refused', $4, $5, $6)`, req.ToHotelID, req.WalkID, s.region, req.From.HotelID, req.From.ReservationID, out.Reason)
			return nil, queueEvents(ctx, b, s.region, walkAnswer(out))
		}
		out.Held, out.Amount, out.Curr = true, reservation.WalkCharge(t.price, req.Stay(), req.Quantity), t.currency
		r := reservation.Reservation{ID: req.WalkID, HotelID: req.ToHotelID, RoomTypeID: typeID, GuestID: req.GuestID,
			CheckIn: req.CheckIn, CheckOut: req.CheckOut, Quantity: req.Quantity, Status: reservation.StatusConfirmed,
			HoldExpiresAt: t.now.UTC(), TotalPriceCents: out.Amount, Currency: t.currency, PaymentRef: "walk:" + req.WalkID,
			ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone, ContactPushToken: req.ContactPushToken, RelocatedFrom: &req.From,
			Version: 1, CreatedAt: t.now.UTC(), UpdatedAt: t.now.UTC()}
		b.Queue(insertRelocatedSQL, r.HotelID, r.ID, s.region, r.RoomTypeID, r.GuestID, r.CheckIn.Time(), r.CheckOut.Time(),
			r.Quantity, r.CreatedAt, r.TotalPriceCents, r.Currency, r.PaymentRef, r.ContactEmail, r.ContactPhone,
			req.From.HotelID, req.From.ReservationID, r.ContactPushToken)
		b.Queue(`INSERT INTO walk_outcomes (hotel_id, walk_id, home_region, outcome, from_hotel_id, from_reservation_id, amount_cents, currency)
			VALUES ($1, $2, $3, 'held', $4, $5, $6, $7)`, req.ToHotelID, req.WalkID, s.region, req.From.HotelID, req.From.ReservationID,
			out.Amount, out.Curr)
		return nil, queueEvents(ctx, b, s.region, reservationInventoryEvent(reservation.EventRelocated, r, t.counts), walkAnswer(out))
	})
	return err
}

// resumedRequest is the walk.requested a resumed walk sends again: the
// first one as the outbox kept it (with the room type the desk chose), or,
// once the outbox pruned it, the same request rebuilt from the stay.
func resumedRequest(ctx context.Context, tx pgx.Tx, r reservation.Reservation) (reservation.WalkRequest, error) {
	var payload []byte
	err := tx.QueryRow(ctx, `SELECT payload FROM outbox WHERE partition_id = $1 AND aggregate_id = $2 AND event_type = $3
		ORDER BY created_at DESC LIMIT 1`, r.HotelID, r.ID, reservation.EventWalkRequested).Scan(&payload)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return reservation.WalkRequest{}, fmt.Errorf("read walk request: %w", err)
	}
	var req reservation.WalkRequest
	if err == nil && json.Unmarshal(payload, &req) == nil && req.WalkID == r.Walk.ReservationID {
		return req, nil
	}
	var minGuests int32
	if err := tx.QueryRow(ctx, `SELECT max_guests FROM room_types WHERE hotel_id = $1 AND room_type_id = $2`,
		r.HotelID, r.RoomTypeID).Scan(&minGuests); err != nil {
		return req, fmt.Errorf("read room type: %w", err)
	}
	return walkRequest(r, "", int(minGuests)), nil
}

// walkAnswer is the target's answer event (its partition, aggregate: the
// walk, which is the id of the stay it holds).
func walkAnswer(o reservation.WalkOutcome) event {
	typ := reservation.EventWalkRefused
	if o.Held {
		typ = reservation.EventWalkHeld
	}
	return event{kind: berth.KindHotel, partitionID: o.To.HotelID, typ: typ, aggregateID: o.WalkID, version: 1, data: o}
}

// FinishWalk is the saga's last step, at the original hotel: on walk.held
// the stay becomes walked, its nights go back to inventory and
// reservation.walked carries the compensation the hotel owes the sister
// hotel; on walk.refused the stay is confirmed again (reservation.walk_undone
// tells the desk). An answer applied already, or of an earlier walk, changes
// nothing (reservation.OnWalkAnswer), so replays are harmless.
func (s *Store) FinishWalk(ctx context.Context, o reservation.WalkOutcome) error {
	defer s.ForgetSoldOut(o.From.HotelID)
	_, err := s.write(ctx, berth.KindHotel, o.From.HotelID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		r, err := lockReservation(ctx, tx, o.From.HotelID, o.From.ReservationID)
		if err != nil {
			return nil, err
		}
		current := ""
		if r.Walk != nil {
			current = r.Walk.ReservationID
		}
		if reservation.OnWalkAnswer(r.Status, current, o.WalkID, o.Held) != reservation.WalkFinish {
			return nil, nil
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		if !o.Held {
			r.Walk = nil
			b.Queue(`UPDATE reservations SET walk_hotel_id = NULL, walk_reservation_id = NULL WHERE hotel_id = $1 AND reservation_id = $2`,
				r.HotelID, r.ID)
			setStatus(b, &r, reservation.StatusConfirmed, now)
			return nil, queueEvents(ctx, b, s.region, event{kind: berth.KindHotel, partitionID: r.HotelID,
				typ: reservation.EventWalkUndone, aggregateID: r.ID, version: r.Version,
				data: map[string]any{"reservation": r, "walk_id": o.WalkID, "reason": o.Reason}})
		}
		counts, err := releaseStay(ctx, tx, r)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM room_nights WHERE hotel_id = $1 AND reservation_id = $2`, r.HotelID, r.ID); err != nil {
			return nil, fmt.Errorf("free rooms: %w", err)
		}
		setStatus(b, &r, reservation.StatusWalked, now)
		comp := reservation.Compensation{AmountCents: o.Amount, Currency: o.Curr, PayeeHotel: o.To.HotelID, Reason: "walk"}
		if err := queueEvents(ctx, b, s.region, event{kind: berth.KindHotel, partitionID: r.HotelID,
			typ: reservation.EventWalked, aggregateID: r.ID, version: r.Version,
			data: map[string]any{"reservation": r, "walk_id": o.WalkID, "relocated_to": o.To, "compensation": comp}}); err != nil {
			return nil, err
		}
		return nil, queueInventory(ctx, b, s.region, r.HotelID, r.RoomTypeID, counts)
	})
	return err
}

// ResumeWalks re-sends walk.requested for stays of this region left
// walking longer than after: a step lost to a crash between regions, or a
// consumer of a partition that moved mid-saga, is tried again. The target
// answers a walk it decided already with the same decision, so a resumed
// walk can never hold a second stay. It reports how many it re-sent.
func (s *Store) ResumeWalks(ctx context.Context, after time.Duration, limit int) (int, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.pool.Query(ctx, `SELECT hotel_id::TEXT, reservation_id::TEXT FROM reservations
		WHERE home_region = $1 AND status = 'walking' AND updated_at < now() - $2 * INTERVAL '1 microsecond'
		ORDER BY updated_at LIMIT $3`, s.region, after.Microseconds(), limit)
	if err != nil {
		return 0, classify(fmt.Errorf("find walks to resume: %w", err))
	}
	type ref struct{ hotel, id string }
	refs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ref, error) {
		var r ref
		return r, row.Scan(&r.hotel, &r.id)
	})
	if err != nil {
		return 0, classify(fmt.Errorf("find walks to resume: %w", err))
	}
	resumed := 0
	for _, c := range refs {
		var sent bool
		_, err := s.write(ctx, berth.KindHotel, c.hotel, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
			sent = false
			r, err := lockReservation(ctx, tx, c.hotel, c.id)
			if err != nil || r.Status != reservation.StatusWalking || r.Walk == nil {
				return nil, err
			}
			req, err := resumedRequest(ctx, tx, r)
			if err != nil {
				return nil, err
			}
			// updated_at moves on so the next round waits again; the
			// version does not (nothing the guest sees changed).
			b.Queue(`UPDATE reservations SET updated_at = now() WHERE hotel_id = $1 AND reservation_id = $2`, r.HotelID, r.ID)
			sent = true
			return nil, queueEvents(ctx, b, s.region, event{kind: berth.KindHotel, partitionID: r.HotelID,
				typ: reservation.EventWalkRequested, aggregateID: r.ID, version: r.Version, data: req})
		})
		code := berth.ErrorCode(err)
		if code == berth.CodeMisdirected || code == berth.CodeNotFound {
			continue
		}
		if err != nil {
			return resumed, err
		}
		if sent {
			resumed++
		}
	}
	return resumed, nil
}
