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

// Physical rooms and their nights (room_nights): what a room is doing on a
// night besides being free — assigned to a stay, or out of order. The locks
// follow docs/adr/0003-lock-order.md ("Rooms"): inventory nights, then the
// room row, then its room_nights rows.

// CreateRoom adds a physical room to a room type of a hotel homed here. A
// number already used in the hotel is 409 invalid_state.
func (s *Store) CreateRoom(ctx context.Context, rm reservation.Room) (reservation.Room, error) {
	_, err := s.write(ctx, berth.KindHotel, rm.HotelID, nil, func(tx pgx.Tx, _ *pgx.Batch) (any, error) {
		var typeExists, numberTaken bool
		err := tx.QueryRow(ctx, `SELECT
				EXISTS (SELECT 1 FROM room_types WHERE hotel_id = $1 AND room_type_id = $2),
				EXISTS (SELECT 1 FROM rooms WHERE hotel_id = $1 AND number = $3)`,
			rm.HotelID, rm.RoomTypeID, rm.Number).Scan(&typeExists, &numberTaken)
		if err != nil {
			return nil, fmt.Errorf("read room type: %w", err)
		}
		if !typeExists {
			return nil, berth.Errorf(berth.CodeNotFound, "room type %s not found", rm.RoomTypeID)
		}
		if numberTaken {
			return nil, berth.Errorf(berth.CodeInvalidState, "room number %s exists already", rm.Number)
		}
		// A concurrent create of the same number loses on the unique index
		// here; DO NOTHING turns that into the same answer instead of a 500.
		err = tx.QueryRow(ctx, `INSERT INTO rooms (hotel_id, room_id, home_region, room_type_id, number, floor, features)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (hotel_id, number) DO NOTHING RETURNING created_at`,
			rm.HotelID, rm.ID, s.region, rm.RoomTypeID, rm.Number, rm.Floor, rm.Features).Scan(&rm.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, berth.Errorf(berth.CodeInvalidState, "room number %s exists already", rm.Number)
		}
		if err != nil {
			return nil, fmt.Errorf("insert room: %w", err)
		}
		return nil, nil
	})
	rm.CreatedAt = rm.CreatedAt.UTC()
	rm.OutOfOrder = []reservation.OutOfOrder{}
	return rm, err
}

// ListRooms lists a hotel's rooms (of one type, or all), by floor and
// number, each with its out-of-order periods.
func (s *Store) ListRooms(ctx context.Context, hotelID, roomTypeID string) ([]reservation.Room, error) {
	if err := s.hotelExists(ctx, hotelID); err != nil {
		return nil, err
	}
	rows, err := s.db.pool.Query(ctx, `SELECT room_id::TEXT, hotel_id::TEXT, room_type_id::TEXT, number, floor, features, created_at
		FROM rooms WHERE hotel_id = $1 AND ($2 = '' OR room_type_id::TEXT = $2) ORDER BY floor, number`, hotelID, roomTypeID)
	if err != nil {
		return nil, classify(fmt.Errorf("list rooms: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (reservation.Room, error) {
		var (
			rm    reservation.Room
			floor int32
		)
		err := row.Scan(&rm.ID, &rm.HotelID, &rm.RoomTypeID, &rm.Number, &floor, &rm.Features, &rm.CreatedAt)
		rm.Floor, rm.CreatedAt, rm.OutOfOrder = int(floor), rm.CreatedAt.UTC(), []reservation.OutOfOrder{}
		if rm.Features == nil {
			rm.Features = []string{}
		}
		return rm, err
	})
	if err != nil {
		return nil, classify(fmt.Errorf("list rooms: %w", err))
	}
	if err := s.addOutOfOrder(ctx, s.db.pool, hotelID, out); err != nil {
		return nil, err
	}
	return out, nil
}

// addOutOfOrder fills in the out-of-order periods of rooms.
func (s *Store) addOutOfOrder(ctx context.Context, q querier, hotelID string, rooms []reservation.Room) error {
	if len(rooms) == 0 {
		return nil
	}
	ids := make([]string, len(rooms))
	at := map[string]int{}
	for i, rm := range rooms {
		ids[i], at[rm.ID] = rm.ID, i
	}
	rows, err := q.Query(ctx, `SELECT room_id::TEXT, night, out_of_order_reason FROM room_nights
		WHERE hotel_id = $1 AND room_id = ANY($2::UUID[]) AND out_of_order_reason IS NOT NULL ORDER BY room_id, night`, hotelID, ids)
	if err != nil {
		return classify(fmt.Errorf("list out-of-order nights: %w", err))
	}
	defer rows.Close()
	nights := map[string][]reservation.Date{}
	reasons := map[string][]string{}
	for rows.Next() {
		var (
			id, reason string
			night      time.Time
		)
		if err := rows.Scan(&id, &night, &reason); err != nil {
			return classify(fmt.Errorf("list out-of-order nights: %w", err))
		}
		nights[id] = append(nights[id], reservation.DateOf(night))
		reasons[id] = append(reasons[id], reason)
	}
	if err := rows.Err(); err != nil {
		return classify(fmt.Errorf("list out-of-order nights: %w", err))
	}
	for id, n := range nights {
		rooms[at[id]].OutOfOrder = reservation.OutOfOrderPeriods(n, reasons[id])
	}
	return nil
}

// getRoom reads one room with its out-of-order periods.
func (s *Store) getRoom(ctx context.Context, hotelID, roomID string) (reservation.Room, error) {
	rooms, err := s.ListRooms(ctx, hotelID, "")
	if err != nil {
		return reservation.Room{}, err
	}
	for _, rm := range rooms {
		if rm.ID == roomID {
			return rm, nil
		}
	}
	return reservation.Room{}, berth.Errorf(berth.CodeNotFound, "room %s not found", roomID)
}

// inventoryNight is a night of a room type's inventory, locked.
type inventoryNight struct {
	night                       time.Time
	total, outOfOrder, reserved int
}

// SetOutOfOrder takes a room out of order for the nights [from, to) (out)
// or puts it back in order. Every night of the period must be loaded in the
// inventory of the room's type — the out-of-order count lives on the
// inventory night, so a night not loaded could not carry it. Each night
// newly out of order lowers that night's sellable limit by one room; a
// night whose reserved rooms would then exceed the limit, or on which the
// room is assigned to a stay, refuses the whole request with 409
// invalid_state naming the nights. Marking a night already out of order,
// or putting back one that is not, changes nothing.
func (s *Store) SetOutOfOrder(ctx context.Context, hotelID, roomID string, from, to reservation.Date, reason string, out bool) (reservation.Room, error) {
	defer s.ForgetSoldOut(hotelID) // rooms may come back
	stay := reservation.Stay{CheckIn: from, CheckOut: to}
	dates := make([]time.Time, 0, stay.Nights())
	for _, d := range stay.Dates() {
		dates = append(dates, d.Time())
	}
	_, err := s.write(ctx, berth.KindHotel, hotelID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		var (
			roomTypeID string
			pct        int32
		)
		// A room's type never changes, so reading it before the locks is safe.
		err := tx.QueryRow(ctx, `SELECT r.room_type_id::TEXT, rt.overbooking_pct FROM rooms r
			JOIN room_types rt ON rt.hotel_id = r.hotel_id AND rt.room_type_id = r.room_type_id
			WHERE r.hotel_id = $1 AND r.room_id = $2`, hotelID, roomID).Scan(&roomTypeID, &pct)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, berth.Errorf(berth.CodeNotFound, "room %s not found", roomID)
		}
		if err != nil {
			return nil, fmt.Errorf("read room: %w", err)
		}
		nights, err := lockInventoryNights(ctx, tx, hotelID, roomTypeID, from, to)
		if err != nil {
			return nil, err
		}
		if out && len(nights) < len(dates) {
			have := make([]time.Time, 0, len(nights))
			for _, n := range nights {
				have = append(have, n.night)
			}
			return nil, &berth.Error{Code: berth.CodeInvalidState,
				Detail: "a room can be out of order only on nights loaded in its type's inventory",
				Extra:  map[string]any{"nights": failedNights(stay, have)}}
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM rooms WHERE hotel_id = $1 AND room_id = $2 FOR UPDATE`, hotelID, roomID); err != nil {
			return nil, fmt.Errorf("lock room: %w", err)
		}
		var changed []time.Time
		if out {
			changed, err = markOutOfOrder(ctx, tx, s.region, hotelID, roomID, roomTypeID, reason, dates)
		} else {
			changed, err = collectNights(tx.Query(ctx, `DELETE FROM room_nights
				WHERE hotel_id = $1 AND room_id = $2 AND night = ANY($3::DATE[]) AND out_of_order_reason IS NOT NULL
				RETURNING night`, hotelID, roomID, dates))
		}
		if err != nil {
			return nil, err
		}
		delta := -1
		if out {
			delta = 1
		}
		counts, err := adjustOutOfOrder(ctx, tx, hotelID, roomTypeID, int(pct), nights, changed, delta)
		if err != nil {
			return nil, err
		}
		return nil, queueInventory(ctx, b, s.region, hotelID, roomTypeID, counts)
	})
	if err != nil {
		return reservation.Room{}, err
	}
	return s.getRoom(ctx, hotelID, roomID)
}

// lockInventoryNights locks a room type's loaded nights of [from, to) in
// ascending order and reads them.
func lockInventoryNights(ctx context.Context, tx pgx.Tx, hotelID, roomTypeID string, from, to reservation.Date) ([]inventoryNight, error) {
	rows, err := tx.Query(ctx, `SELECT night, total_rooms, out_of_order, reserved FROM room_inventory
		WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $3 AND night < $4
		ORDER BY night FOR UPDATE`, hotelID, roomTypeID, from.Time(), to.Time())
	if err != nil {
		return nil, fmt.Errorf("lock nights: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (inventoryNight, error) {
		var (
			n                  inventoryNight
			total, ooo, reserv int32
		)
		err := row.Scan(&n.night, &total, &ooo, &reserv)
		n.total, n.outOfOrder, n.reserved = int(total), int(ooo), int(reserv)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("lock nights: %w", err)
	}
	return out, nil
}

// markOutOfOrder inserts the room's out-of-order nights and returns the
// ones that were not out of order before; a night the room is assigned to a
// stay on refuses the request.
func markOutOfOrder(ctx context.Context, tx pgx.Tx, region, hotelID, roomID, roomTypeID, reason string, dates []time.Time) ([]time.Time, error) {
	added, err := collectNights(tx.Query(ctx, `INSERT INTO room_nights (hotel_id, room_id, night, home_region, room_type_id, out_of_order_reason)
		SELECT $1, $2, d, $3, $4, $5 FROM unnest($6::DATE[]) AS d
		ON CONFLICT (hotel_id, room_id, night) DO NOTHING RETURNING night`,
		hotelID, roomID, region, roomTypeID, reason, dates))
	if err != nil {
		return nil, fmt.Errorf("mark out of order: %w", err)
	}
	assigned, err := collectNights(tx.Query(ctx, `SELECT night FROM room_nights
		WHERE hotel_id = $1 AND room_id = $2 AND night = ANY($3::DATE[]) AND reservation_id IS NOT NULL ORDER BY night`,
		hotelID, roomID, dates))
	if err != nil {
		return nil, fmt.Errorf("read assigned nights: %w", err)
	}
	if len(assigned) > 0 {
		return nil, &berth.Error{Code: berth.CodeInvalidState,
			Detail: fmt.Sprintf("the room is assigned to a stay on %d of the nights", len(assigned)),
			Extra:  map[string]any{"nights": dateStrings(assigned)}}
	}
	return added, nil
}

// adjustOutOfOrder adds delta to the out-of-order count of the changed
// nights (all among the locked nights) and folds the sellable limit again,
// refusing nights whose reserved rooms would exceed it. It returns what is
// left of each changed night, for the inventory.changed event.
func adjustOutOfOrder(ctx context.Context, tx pgx.Tx, hotelID, roomTypeID string, pct int, nights []inventoryNight, changed []time.Time, delta int) ([]reservation.NightCount, error) {
	if len(changed) == 0 {
		return nil, nil
	}
	isChanged := map[string]bool{}
	for _, c := range changed {
		isChanged[reservation.DateOf(c).String()] = true
	}
	var (
		dates       []time.Time
		ooo, limits []int32
		over        []string
	)
	for _, n := range nights {
		if !isChanged[reservation.DateOf(n.night).String()] {
			continue
		}
		o := max(n.outOfOrder+delta, 0)
		limit := reservation.SellLimit(max(n.total-o, 0), pct)
		if n.reserved > limit {
			over = append(over, reservation.DateOf(n.night).String())
		}
		dates, ooo, limits = append(dates, n.night), append(ooo, int32(o)), append(limits, int32(limit))
	}
	if len(over) > 0 {
		return nil, &berth.Error{Code: berth.CodeInvalidState,
			Detail: fmt.Sprintf("%d night(s) have more rooms reserved than would be left to sell", len(over)),
			Extra:  map[string]any{"nights": over}}
	}
	counts, err := nightCounts(tx.Query(ctx, `UPDATE room_inventory AS i SET out_of_order = u.o, sell_limit = u.l, version = i.version + 1
		FROM unnest($3::DATE[], $4::INT4[], $5::INT4[]) AS u(night, o, l)
		WHERE i.hotel_id = $1 AND i.room_type_id = $2 AND i.night = u.night
		RETURNING i.night, GREATEST(i.sell_limit - i.reserved, 0), i.version`, hotelID, roomTypeID, dates, ooo, limits))
	if err != nil {
		return nil, fmt.Errorf("update out-of-order counts: %w", err)
	}
	return counts, nil
}

// collectNights reads a one-column result of dates.
func collectNights(rows pgx.Rows, err error) ([]time.Time, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[time.Time])
}

func dateStrings(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = reservation.DateOf(t).String()
	}
	return out
}
