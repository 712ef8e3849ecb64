package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// The stay at the front desk: check-in assigns rooms, check-out and the
// no-show job give nights back. Every write is a fenced write of the hotel
// (Store.write) and takes its locks in the order of
// docs/adr/0003-lock-order.md: the reservation, inventory nights, rooms,
// room nights.

// addRooms fills in the rooms of the stays among rs.
func (s *Store) addRooms(ctx context.Context, q querier, rs []*reservation.Reservation) error {
	var ids []string
	at := map[string]*reservation.Reservation{}
	hotelID := ""
	for _, r := range rs {
		if r.Status == reservation.StatusCheckedIn || r.Status == reservation.StatusCheckedOut {
			ids, at[r.ID], hotelID = append(ids, r.ID), r, r.HotelID
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, `SELECT DISTINCT n.reservation_id::TEXT, n.room_id::TEXT, m.number
		FROM room_nights n JOIN rooms m ON m.hotel_id = n.hotel_id AND m.room_id = n.room_id
		WHERE n.hotel_id = $1 AND n.reservation_id = ANY($2::UUID[]) ORDER BY 1, 3`, hotelID, ids)
	if err != nil {
		return classify(fmt.Errorf("read stay rooms: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var rm reservation.AssignedRoom
		if err := rows.Scan(&id, &rm.RoomID, &rm.Number); err != nil {
			return classify(fmt.Errorf("read stay rooms: %w", err))
		}
		at[id].Rooms = append(at[id].Rooms, rm)
	}
	return classify(rows.Err())
}

// hotelZone reads a hotel's time zone: the front desk's day is local.
func hotelZone(ctx context.Context, q querier, hotelID string) (*time.Location, error) {
	var tz string
	if err := q.QueryRow(ctx, `SELECT timezone FROM hotels WHERE hotel_id = $1`, hotelID).Scan(&tz); err != nil {
		return nil, fmt.Errorf("read hotel time zone: %w", err)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("hotel time zone %q: %w", tz, err)
	}
	return loc, nil
}

// CheckIn marks a confirmed reservation checked in and assigns it rooms of
// its type for every night of the stay, all or none: the rooms the desk
// picked (roomIDs, one per room booked) or free, in-order rooms chosen by
// floor and number. No room free for every night is 409 no_room_free (the
// desk walks the guest); the wrong status or day is 409 invalid_state.
func (s *Store) CheckIn(ctx context.Context, hotelID, reservationID string, roomIDs []string, idem *berth.Idem) (berth.Response, error) {
	return s.write(ctx, berth.KindHotel, hotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		r, err := lockReservation(ctx, tx, hotelID, reservationID)
		if err != nil {
			return nil, err
		}
		loc, err := hotelZone(ctx, tx, hotelID)
		if err != nil {
			return nil, err
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		today := reservation.LocalDate(now, loc)
		switch reservation.OnCheckIn(r.Status, r.Stay(), today) {
		case reservation.CheckInRefuse:
			return r, berth.Errorf(berth.CodeInvalidState, "a %s reservation cannot be checked in", r.Status)
		case reservation.CheckInTooEarly:
			return r, berth.Errorf(berth.CodeInvalidState, "the stay begins on %s; it is %s at the hotel", r.CheckIn, today)
		case reservation.CheckInOver:
			return r, berth.Errorf(berth.CodeInvalidState, "the stay ended on %s", r.CheckOut)
		}
		if len(roomIDs) > 0 && len(roomIDs) != r.Quantity {
			return r, berth.Errorf(berth.CodeInvalidState, "%d room(s) picked for %d booked", len(roomIDs), r.Quantity)
		}
		rooms, err := assignRooms(ctx, tx, s.region, r, roomIDs)
		if err != nil && len(roomIDs) == 0 {
			// The desk walks the guest: tell it where to (walks.go).
			err = withWalkOptions(ctx, tx, r, err)
		}
		if err != nil {
			return r, err
		}
		setStatus(b, &r, reservation.StatusCheckedIn, now)
		r.Rooms = rooms
		return r, queueEvents(ctx, b, s.region, reservationEvent(reservation.EventCheckedIn, r))
	})
}

// freeRoomsSQL chooses the first free rooms of a type for the nights
// [$3, $4) by floor and number, locked. The taken rooms are one
// uncorrelated NOT IN set — an index-only range of room_nights_type_night_idx
// that PostgreSQL hashes once — rather than a NOT EXISTS per room: with
// LIMIT, the planner probes room_nights room by room in floor order, and the
// first rooms in that order are the ones assigned first, so every check-in
// read every taken room's index pages (~4 buffers a room; EXPLAIN ANALYZE in
// docs/PERFORMANCE.md). room_nights.room_type_id is always the room's type
// (booking verify checks it), and room_id is never NULL, so NOT IN means
// NOT EXISTS here. PostgreSQL hashes the set when its estimate fits in
// hash_mem (work_mem × hash_mem_multiplier: some 100,000 room-nights at the
// defaults, a 30-night stay in a type of 3,000 rooms); past that it would
// scan the set per room, so a bigger type needs a larger work_mem.
const freeRoomsSQL = `SELECT m.room_id::TEXT, m.number, m.room_type_id::TEXT FROM rooms m
	WHERE m.hotel_id = $1 AND m.room_type_id = $2 AND m.room_id <> ALL($5::UUID[])
	  AND m.room_id NOT IN (SELECT n.room_id FROM room_nights n
	                        WHERE n.hotel_id = $1 AND n.room_type_id = $2 AND n.night >= $3 AND n.night < $4)
	ORDER BY m.floor, m.number, m.room_id LIMIT $6 FOR UPDATE OF m`

// skipLocked makes freeRoomsSQL pass over the rooms other desks hold.
const skipLocked = ` SKIP LOCKED`

// assignRooms gives the stay r.Quantity rooms for every night, or returns
// an error with nothing assigned. The unique key of room_nights is the
// fence: a room-night a concurrent check-in inserted first is skipped by
// ON CONFLICT DO NOTHING (after waiting for that transaction), the room is
// given up again and another tried, until no untried room is free — a
// fixed number of tries refused guests while rooms were still free when
// many desks worked at once. Locking candidate rooms FOR UPDATE SKIP
// LOCKED spreads concurrent check-ins over the free rooms instead of
// queueing them all on the first. A desk keeps the lock of a room it gave
// back (a concurrent check-in took one of its nights first) until it
// commits, so a round that skipped finds nothing is not yet a refusal:
// the next round waits for the rooms other desks hold, and tries those
// that are still free once they commit or roll back; only a round that
// waited and found nothing refuses. A desk waiting on another that waits
// on it is a deadlock, which the transaction's retry answers.
func assignRooms(ctx context.Context, tx pgx.Tx, region string, r reservation.Reservation, picked []string) ([]reservation.AssignedRoom, error) {
	dates := make([]time.Time, 0, r.Stay().Nights())
	for _, d := range r.Stay().Dates() {
		dates = append(dates, d.Time())
	}
	var got []reservation.AssignedRoom
	tried := []string{} // not nil: <> ALL(NULL) would match no room
	// Every round that finds candidates tries them, so tried grows and the
	// loop ends within the type's rooms.
	skip := true // whether the next round passes over the rooms other desks hold
	for round := 0; len(got) < r.Quantity; round++ {
		var (
			rows pgx.Rows
			err  error
		)
		if len(picked) > 0 {
			if round > 0 {
				break
			}
			rows, err = tx.Query(ctx, `SELECT room_id::TEXT, number, room_type_id::TEXT FROM rooms
				WHERE hotel_id = $1 AND room_id = ANY($2::UUID[]) ORDER BY room_id FOR UPDATE`, r.HotelID, picked)
		} else {
			q := freeRoomsSQL
			if skip {
				q += skipLocked
			}
			rows, err = tx.Query(ctx, q, r.HotelID, r.RoomTypeID, r.CheckIn.Time(), r.CheckOut.Time(), tried, r.Quantity-len(got))
		}
		if err != nil {
			return nil, fmt.Errorf("find rooms: %w", err)
		}
		type cand struct{ id, number, roomType string }
		cands, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (cand, error) {
			var c cand
			return c, row.Scan(&c.id, &c.number, &c.roomType)
		})
		if err != nil {
			return nil, fmt.Errorf("find rooms: %w", err)
		}
		if len(picked) > 0 {
			if len(cands) != len(picked) {
				return nil, berth.Errorf(berth.CodeNotFound, "a picked room was not found")
			}
			for _, c := range cands {
				if c.roomType != r.RoomTypeID {
					return nil, berth.Errorf(berth.CodeInvalidState, "room %s is not of the booked room type", c.number)
				}
			}
		}
		if len(cands) == 0 {
			if len(picked) > 0 || !skip {
				break
			}
			skip = false // nothing free but what other desks hold: wait for them
			continue
		}
		skip = true
		ids := make([]string, len(cands))
		for i, c := range cands {
			ids[i] = c.id
			tried = append(tried, c.id)
		}
		taken, err := collectStrings(tx.Query(ctx, `INSERT INTO room_nights (hotel_id, room_id, night, home_region, room_type_id, reservation_id)
			SELECT $1, m, d, $2, $3, $4 FROM unnest($5::UUID[]) AS m CROSS JOIN unnest($6::DATE[]) AS d
			ON CONFLICT (hotel_id, room_id, night) DO NOTHING RETURNING room_id::TEXT`,
			r.HotelID, region, r.RoomTypeID, r.ID, ids, dates))
		if err != nil {
			return nil, fmt.Errorf("assign rooms: %w", err)
		}
		count := map[string]int{}
		for _, id := range taken {
			count[id]++
		}
		var partial []string
		for _, c := range cands {
			switch {
			case count[c.id] == len(dates) && len(got) < r.Quantity:
				got = append(got, reservation.AssignedRoom{RoomID: c.id, Number: c.number})
			case count[c.id] > 0:
				partial = append(partial, c.id)
			}
		}
		if len(partial) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM room_nights WHERE hotel_id = $1 AND reservation_id = $2 AND room_id = ANY($3::UUID[])`,
				r.HotelID, r.ID, partial); err != nil {
				return nil, fmt.Errorf("give back rooms: %w", err)
			}
		}
	}
	if len(got) < r.Quantity {
		// Nothing of this attempt may stay: the refusal commits with its key.
		if _, err := tx.Exec(ctx, `DELETE FROM room_nights WHERE hotel_id = $1 AND reservation_id = $2`, r.HotelID, r.ID); err != nil {
			return nil, fmt.Errorf("give back rooms: %w", err)
		}
		if len(picked) > 0 {
			return nil, berth.Errorf(berth.CodeNoRoomFree, "a picked room is not free for every night of the stay")
		}
		return nil, berth.Errorf(berth.CodeNoRoomFree, "%d of %d room(s) of the booked type are free for every night of the stay", len(got), r.Quantity)
	}
	return got, nil
}

func collectStrings(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// CheckOut marks a checked-in stay checked out. Leaving before the last
// night (by the hotel's date) gives the remaining nights back to inventory
// and frees the rooms from that night on.
func (s *Store) CheckOut(ctx context.Context, hotelID, reservationID string, idem *berth.Idem) (berth.Response, error) {
	defer s.ForgetSoldOut(hotelID) // rooms may come back
	return s.write(ctx, berth.KindHotel, hotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		r, err := lockReservation(ctx, tx, hotelID, reservationID)
		if err != nil {
			return nil, err
		}
		if r.Status != reservation.StatusCheckedIn {
			return r, berth.Errorf(berth.CodeInvalidState, "a %s reservation cannot be checked out", r.Status)
		}
		loc, err := hotelZone(ctx, tx, hotelID)
		if err != nil {
			return nil, err
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		from := reservation.ReleaseOnDeparture(r.Stay(), reservation.LocalDate(now, loc))
		counts, err := releaseFrom(ctx, tx, b, &r, from)
		if err != nil {
			return nil, err
		}
		setStatus(b, &r, reservation.StatusCheckedOut, now)
		if err := s.addRooms(ctx, tx, []*reservation.Reservation{&r}); err != nil {
			return nil, err
		}
		return r, queueEvents(ctx, b, s.region, reservationInventoryEvent(reservation.EventCheckedOut, r, counts))
	})
}

// releaseFrom gives the nights [from, check_out) of r back to inventory and
// frees its rooms on them; nothing when from is the check-out date. It
// returns what is left of each night given back, for the search summary.
func releaseFrom(ctx context.Context, tx pgx.Tx, b *pgx.Batch, r *reservation.Reservation, from reservation.Date) ([]reservation.NightCount, error) {
	if !from.Before(r.CheckOut) {
		return nil, nil
	}
	rest := reservation.Stay{CheckIn: from, CheckOut: r.CheckOut}
	dates := make([]time.Time, 0, rest.Nights())
	for _, d := range rest.Dates() {
		dates = append(dates, d.Time())
	}
	counts, err := nightCounts(tx.Query(ctx, releaseNightsSQL, r.HotelID, r.RoomTypeID, dates, r.Quantity))
	if err != nil {
		return nil, fmt.Errorf("release nights: %w", err)
	}
	if len(counts) != len(dates) {
		return nil, fmt.Errorf("release nights of %s: %d of %d nights found", r.ID, len(counts), len(dates))
	}
	if _, err := tx.Exec(ctx, `DELETE FROM room_nights WHERE hotel_id = $1 AND reservation_id = $2 AND night >= $3`,
		r.HotelID, r.ID, from.Time()); err != nil {
		return nil, fmt.Errorf("free rooms: %w", err)
	}
	r.ReleasedFrom = &from
	b.Queue(`UPDATE reservations SET released_from = $3 WHERE hotel_id = $1 AND reservation_id = $2`, r.HotelID, r.ID, from.Time())
	return counts, nil
}

// Arrivals lists the stays of a hotel beginning on day (the hotel's date)
// that the desk deals with: confirmed, checked in or out, no-shows.
func (s *Store) Arrivals(ctx context.Context, hotelID string, day reservation.Date) ([]reservation.Reservation, error) {
	if err := s.hotelExists(ctx, hotelID); err != nil {
		return nil, err
	}
	rows, err := s.db.pool.Query(ctx, `SELECT `+reservationColumns+` FROM reservations
		WHERE hotel_id = $1 AND check_in = $2 AND status IN ('confirmed', 'checked_in', 'checked_out', 'no_show', 'walking', 'walked')
		ORDER BY guest_id, reservation_id LIMIT 5000`, hotelID, day.Time())
	if err != nil {
		return nil, classify(fmt.Errorf("arrivals: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (reservation.Reservation, error) { return scanReservation(row) })
	if err != nil {
		return nil, classify(fmt.Errorf("arrivals: %w", err))
	}
	ptrs := make([]*reservation.Reservation, len(out))
	for i := range out {
		ptrs[i] = &out[i]
	}
	if out == nil {
		out = []reservation.Reservation{}
	}
	return out, s.addRooms(ctx, s.db.pool, ptrs)
}

// NoShowOptions tune MarkNoShows.
type NoShowOptions struct {
	// Cutoff is the hotel's local time of day, on the day after arrival,
	// after which a confirmed guest who has not checked in is a no-show.
	Cutoff time.Duration
	// Lookback bounds how far back arrivals are considered (older confirmed
	// stays, e.g. from before the front desk existed, are left alone).
	Lookback time.Duration
	// Limit bounds the reservations marked per call.
	Limit int
}

// MarkNoShows marks confirmed reservations of hotels homed in this region
// whose guest never checked in, once the hotel's cut-off on the day after
// arrival has passed: the first night stays charged (the reservation.no_show
// event carries the amount), the later nights go back to inventory. Each
// one is its own fenced write that re-reads the status under the
// reservation's lock, so a late check-in or a cancel that won the race is
// left alone, and a second run changes nothing.
func (s *Store) MarkNoShows(ctx context.Context, now time.Time, o NoShowOptions) (int, error) {
	if o.Limit <= 0 {
		o.Limit = 200
	}
	if o.Lookback <= 0 {
		o.Lookback = 7 * 24 * time.Hour
	}
	// Every zone's cut-off after arrival is at least 10 h after the
	// arrival date began in UTC, so arrivals up to today's UTC date are the
	// candidates; the exact moment is decided per hotel below.
	rows, err := s.db.pool.Query(ctx, `SELECT r.hotel_id::TEXT, r.reservation_id::TEXT, r.check_in, h.timezone
		FROM reservations r JOIN hotels h ON h.hotel_id = r.hotel_id
		WHERE r.home_region = $1 AND r.status = 'confirmed' AND r.check_in <= $2 AND r.check_in >= $3
		ORDER BY r.check_in, r.hotel_id, r.reservation_id LIMIT $4`,
		s.region, reservation.DateOf(now.UTC()).Time(), reservation.DateOf(now.UTC().Add(-o.Lookback)).Time(), o.Limit)
	if err != nil {
		return 0, classify(fmt.Errorf("find no-shows: %w", err))
	}
	type cand struct {
		hotelID, id string
		checkIn     time.Time
		tz          string
	}
	cands, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (cand, error) {
		var c cand
		return c, row.Scan(&c.hotelID, &c.id, &c.checkIn, &c.tz)
	})
	if err != nil {
		return 0, classify(fmt.Errorf("find no-shows: %w", err))
	}
	marked := 0
	for _, c := range cands {
		loc, err := time.LoadLocation(c.tz)
		if err != nil || now.Before(reservation.NoShowAt(reservation.DateOf(c.checkIn), loc, o.Cutoff)) {
			continue
		}
		ok, err := s.markNoShow(ctx, c.hotelID, c.id, now, o.Cutoff)
		if berth.ErrorCode(err) == berth.CodeMisdirected || berth.ErrorCode(err) == berth.CodeNotFound {
			continue // moved away: its new home marks it
		}
		if err != nil {
			return marked, err
		}
		if ok {
			marked++
		}
	}
	return marked, nil
}

// markNoShow marks one reservation a no-show if, under its lock, it still
// is one at the job's instant now, and reports whether it did.
func (s *Store) markNoShow(ctx context.Context, hotelID, reservationID string, now time.Time, cutoff time.Duration) (bool, error) {
	var marked bool
	defer s.ForgetSoldOut(hotelID)
	_, err := s.write(ctx, berth.KindHotel, hotelID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		marked = false
		r, err := lockReservation(ctx, tx, hotelID, reservationID)
		if err != nil {
			return nil, err
		}
		if r.Status != reservation.StatusConfirmed {
			return nil, nil // checked in late, cancelled, or marked already
		}
		loc, err := hotelZone(ctx, tx, hotelID)
		if err != nil {
			return nil, err
		}
		if now.Before(reservation.NoShowAt(r.CheckIn, loc, cutoff)) {
			return nil, nil
		}
		at, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		counts, err := releaseFrom(ctx, tx, b, &r, r.CheckIn.AddDays(1))
		if err != nil {
			return nil, err
		}
		setStatus(b, &r, reservation.StatusNoShow, at)
		charge := map[string]any{"reservation": r, "amount_cents": reservation.FirstNightCents(r), "currency": r.Currency,
			"payment_ref": r.PaymentRef, "reason": "no_show"}
		marked = true
		if err := queueEvents(ctx, b, s.region, event{kind: berth.KindHotel, partitionID: hotelID,
			typ: reservation.EventNoShow, aggregateID: r.ID, version: r.Version, data: charge}); err != nil {
			return nil, err
		}
		return nil, queueInventory(ctx, b, s.region, hotelID, r.RoomTypeID, counts)
	})
	if err != nil {
		return false, err
	}
	return marked, nil
}
