package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/search"
	"github.com/jackc/pgx/v5"
)

// CreateHotel inserts a hotel and its placement row in one transaction. Any
// region may create a partition: the new rows carry the requested home.
func (s *Store) CreateHotel(ctx context.Context, h reservation.Hotel) (reservation.Hotel, error) {
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO placements (kind, partition_id, home_region) VALUES ('hotel', $1, $2)`, h.ID, h.HomeRegion)
		b.Queue(`INSERT INTO hotels (hotel_id, home_region, name, city, city_key, country, timezone)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created_at`,
			h.ID, h.HomeRegion, h.Name, h.City, search.FoldCity(h.City), h.Country, h.Timezone)
		br := tx.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("insert placement: %w", err)
		}
		if err := br.QueryRow().Scan(&h.CreatedAt); err != nil {
			br.Close()
			return fmt.Errorf("insert hotel: %w", err)
		}
		return br.Close()
	})
	if sqlState(err) == "23505" {
		return h, berth.Errorf(berth.CodeInvalidState, "hotel %s exists already", h.ID)
	}
	h.RoomTypes = []reservation.RoomType{}
	return h, classify(err)
}

// GetHotel returns a hotel with its room types.
func (s *Store) GetHotel(ctx context.Context, hotelID string) (reservation.Hotel, error) {
	var h reservation.Hotel
	err := s.db.pool.QueryRow(ctx,
		`SELECT hotel_id::TEXT, home_region, name, city, country, timezone, created_at FROM hotels WHERE hotel_id = $1`,
		hotelID).Scan(&h.ID, &h.HomeRegion, &h.Name, &h.City, &h.Country, &h.Timezone, &h.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, berth.Errorf(berth.CodeNotFound, "hotel %s not found", hotelID)
	}
	if err != nil {
		return h, classify(fmt.Errorf("get hotel: %w", err))
	}
	h.RoomTypes, err = s.roomTypes(ctx, s.db.pool, hotelID)
	return h, err
}

type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

func (s *Store) roomTypes(ctx context.Context, q querier, hotelID string) ([]reservation.RoomType, error) {
	rows, err := q.Query(ctx,
		`SELECT room_type_id::TEXT, hotel_id::TEXT, name, max_guests, price_cents, currency, overbooking_pct, default_total_rooms
		 FROM room_types WHERE hotel_id = $1 ORDER BY name, room_type_id`, hotelID)
	if err != nil {
		return nil, classify(fmt.Errorf("list room types: %w", err))
	}
	out, err := pgx.CollectRows(rows, scanRoomType)
	if err != nil {
		return nil, classify(fmt.Errorf("list room types: %w", err))
	}
	return out, nil
}

func scanRoomType(row pgx.CollectableRow) (reservation.RoomType, error) {
	var (
		rt  reservation.RoomType
		def *int32
		mg  int32
		pct int32
	)
	err := row.Scan(&rt.ID, &rt.HotelID, &rt.Name, &mg, &rt.PriceCents, &rt.Currency, &pct, &def)
	rt.MaxGuests, rt.OverbookingPct = int(mg), int(pct)
	if def != nil {
		v := int(*def)
		rt.DefaultTotalRooms = &v
	}
	return rt, err
}

// CreateRoomType adds a room type to a hotel homed in this region.
func (s *Store) CreateRoomType(ctx context.Context, rt reservation.RoomType) (reservation.RoomType, error) {
	_, err := s.write(ctx, berth.KindHotel, rt.HotelID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		b.Queue(`INSERT INTO room_types (hotel_id, room_type_id, home_region, name, max_guests, price_cents, currency, overbooking_pct, default_total_rooms)
			SELECT hotel_id, $2, home_region, $3, $4, $5, $6, $7, $8 FROM hotels WHERE hotel_id = $1`,
			rt.HotelID, rt.ID, rt.Name, rt.MaxGuests, rt.PriceCents, rt.Currency, rt.OverbookingPct, rt.DefaultTotalRooms)
		return nil, nil
	})
	if err != nil {
		return rt, err
	}
	if rt.DefaultTotalRooms != nil {
		today := reservation.DateOf(time.Now().UTC())
		if _, err := s.SetInventory(ctx, rt.HotelID, rt.ID, today, today.AddDays(reservation.SaleWindowDays), *rt.DefaultTotalRooms, true); err != nil {
			return rt, err
		}
	}
	return rt, nil
}

// SetInventory sets total rooms for the nights [from, to). Lowering a night
// below what is already reserved is refused (409 invalid_state, listing the
// nights); the CHECK constraint stays as the last fence. With onlyMissing,
// existing nights are left alone (the rolling job).
func (s *Store) SetInventory(ctx context.Context, hotelID, roomTypeID string, from, to reservation.Date, total int, onlyMissing bool) (int, error) {
	defer s.ForgetSoldOut(hotelID) // rooms may come back
	stay := reservation.Stay{CheckIn: from, CheckOut: to}
	dates := make([]time.Time, 0, stay.Nights())
	for _, d := range stay.Dates() {
		dates = append(dates, d.Time())
	}
	var nights int
	_, err := s.write(ctx, berth.KindHotel, hotelID, nil, func(tx pgx.Tx, _ *pgx.Batch) (any, error) {
		var pct int32
		err := tx.QueryRow(ctx, `SELECT overbooking_pct FROM room_types WHERE hotel_id = $1 AND room_type_id = $2`,
			hotelID, roomTypeID).Scan(&pct)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, berth.Errorf(berth.CodeNotFound, "room type %s not found", roomTypeID)
		}
		if err != nil {
			return nil, fmt.Errorf("read room type: %w", err)
		}
		if onlyMissing {
			// A night not loaded has no room out of order (SetOutOfOrder
			// refuses such nights), so its limit is the plain fold.
			tag, err := tx.Exec(ctx,
				`INSERT INTO room_inventory (hotel_id, room_type_id, night, home_region, total_rooms, sell_limit)
				 SELECT $1, $2, d, $3, $4, $5 FROM unnest($6::DATE[]) AS d
				 ON CONFLICT (hotel_id, room_type_id, night) DO NOTHING`,
				hotelID, roomTypeID, s.region, total, reservation.SellLimit(total, int(pct)), dates)
			nights = int(tag.RowsAffected())
			return nil, err
		}
		// Lock the nights that exist, in ascending date order, and find any
		// that the new limit — the total less the rooms out of order that
		// night — would put below what is already reserved.
		locked, err := lockInventoryNights(ctx, tx, hotelID, roomTypeID, from, to)
		if err != nil {
			return nil, err
		}
		outOfOrder := make(map[string]int, len(locked))
		var over []string
		for _, n := range locked {
			outOfOrder[reservation.DateOf(n.night).String()] = n.outOfOrder
			if n.reserved > reservation.SellLimit(max(total-n.outOfOrder, 0), int(pct)) {
				over = append(over, reservation.DateOf(n.night).String())
			}
		}
		if len(over) > 0 {
			return nil, &berth.Error{Code: berth.CodeInvalidState,
				Detail: fmt.Sprintf("%d night(s) have more rooms reserved than the new limit allows", len(over)),
				Extra:  map[string]any{"nights": over}}
		}
		limits := make([]int32, len(dates))
		for i, d := range dates {
			limits[i] = int32(reservation.SellLimit(max(total-outOfOrder[reservation.DateOf(d).String()], 0), int(pct)))
		}
		tag, err := tx.Exec(ctx,
			`INSERT INTO room_inventory (hotel_id, room_type_id, night, home_region, total_rooms, sell_limit)
			 SELECT $1, $2, u.d, $3, $4, u.l FROM unnest($5::DATE[], $6::INT4[]) AS u(d, l)
			 ON CONFLICT (hotel_id, room_type_id, night)
			 DO UPDATE SET total_rooms = excluded.total_rooms, sell_limit = excluded.sell_limit`,
			hotelID, roomTypeID, s.region, total, dates, limits)
		if err != nil {
			if constraintName(err) == "room_inventory_reserved_within_limit" {
				return nil, berth.Errorf(berth.CodeInvalidState, "a night has more rooms reserved than the new limit")
			}
			return nil, fmt.Errorf("set inventory: %w", err)
		}
		nights = int(tag.RowsAffected())
		return nil, nil
	})
	return nights, err
}

// Availability returns what is left of each room type (or one) over a stay.
// It reads the local database and may be seconds stale on CockroachDB
// follower reads; it never feeds a write decision.
func (s *Store) Availability(ctx context.Context, hotelID string, stay reservation.Stay, roomTypeID string) (reservation.Availability, error) {
	av := reservation.Availability{HotelID: hotelID, CheckIn: stay.CheckIn, CheckOut: stay.CheckOut, RoomTypes: []reservation.RoomTypeAvailability{}}
	rows, err := s.db.pool.Query(ctx,
		`SELECT rt.room_type_id::TEXT, rt.name, rt.price_cents, rt.currency, rt.max_guests, i.night, i.sell_limit - i.reserved
		 FROM room_types rt
		 LEFT JOIN room_inventory i ON i.hotel_id = rt.hotel_id AND i.room_type_id = rt.room_type_id
		      AND i.night >= $2 AND i.night < $3
		 WHERE rt.hotel_id = $1 AND ($4 = '' OR rt.room_type_id::TEXT = $4)
		 ORDER BY rt.name, rt.room_type_id, i.night`,
		hotelID, stay.CheckIn.Time(), stay.CheckOut.Time(), roomTypeID)
	if err != nil {
		return av, classify(fmt.Errorf("availability: %w", err))
	}
	defer rows.Close()
	dates := stay.Dates()
	var cur *reservation.RoomTypeAvailability
	left := map[string]int{}
	flush := func() {
		if cur == nil {
			return
		}
		cur.Available = -1
		for _, d := range dates {
			n := max(left[d.String()], 0)
			cur.Nights = append(cur.Nights, reservation.NightAvailability{Date: d, Available: n})
			if cur.Available < 0 || n < cur.Available {
				cur.Available = n
			}
		}
		cur.Available = max(cur.Available, 0)
		av.RoomTypes = append(av.RoomTypes, *cur)
		clear(left)
	}
	for rows.Next() {
		var (
			id, name, currency string
			price              int64
			maxGuests          int32
			night              *time.Time
			avail              *int32
		)
		if err := rows.Scan(&id, &name, &price, &currency, &maxGuests, &night, &avail); err != nil {
			return av, classify(fmt.Errorf("availability: %w", err))
		}
		if cur == nil || cur.RoomTypeID != id {
			flush()
			cur = &reservation.RoomTypeAvailability{RoomTypeID: id, Name: name, PriceCents: price, Currency: currency,
				MaxGuests: int(maxGuests), Nights: make([]reservation.NightAvailability, 0, len(dates))}
		}
		if night != nil && avail != nil {
			left[reservation.DateOf(*night).String()] = int(*avail)
		}
	}
	if err := rows.Err(); err != nil {
		return av, classify(fmt.Errorf("availability: %w", err))
	}
	flush()
	if len(av.RoomTypes) == 0 {
		if err := s.hotelExists(ctx, hotelID); err != nil {
			return av, err
		}
		if roomTypeID != "" {
			return av, berth.Errorf(berth.CodeNotFound, "room type %s not found", roomTypeID)
		}
	}
	return av, nil
}

func (s *Store) hotelExists(ctx context.Context, hotelID string) error {
	var ok bool
	if err := s.db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hotels WHERE hotel_id = $1)`, hotelID).Scan(&ok); err != nil {
		return classify(fmt.Errorf("hotel exists: %w", err))
	}
	if !ok {
		return berth.Errorf(berth.CodeNotFound, "hotel %s not found", hotelID)
	}
	return nil
}
