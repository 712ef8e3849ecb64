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

// CreateHotel inserts a hotel and its placement row in one transaction, with
// its first hotel.catalog event. Any region may create a partition: the new
// rows carry the requested home.
func (s *Store) CreateHotel(ctx context.Context, h reservation.Hotel) (reservation.Hotel, error) {
	if h.Amenities == nil {
		h.Amenities = []string{}
	}
	h.RoomTypes, h.CatalogVersion = []reservation.RoomType{}, 1
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO placements (kind, partition_id, home_region) VALUES ('hotel', $1, $2)`, h.ID, h.HomeRegion)
		b.Queue(`INSERT INTO hotels (hotel_id, home_region, name, city, city_key, country, timezone, latitude, longitude, amenities, chain, catalog_version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULLIF($11, ''), 1) RETURNING created_at`,
			h.ID, h.HomeRegion, h.Name, h.City, search.FoldCity(h.City), h.Country, h.Timezone, h.Latitude, h.Longitude, h.Amenities, h.Chain)
		br := tx.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("insert placement: %w", err)
		}
		if err := br.QueryRow().Scan(&h.CreatedAt); err != nil {
			br.Close()
			return fmt.Errorf("insert hotel: %w", err)
		}
		if err := br.Close(); err != nil {
			return err
		}
		h.CreatedAt = h.CreatedAt.UTC()
		// Like every row of the partition, its first event carries the
		// hotel's home (any region may create a hotel): the home region's
		// relay publishes it, before any later event of the hotel.
		ev := &pgx.Batch{}
		if err := queueEvents(ctx, ev, h.HomeRegion, catalogEvent(h)); err != nil {
			return err
		}
		return tx.SendBatch(ctx, ev).Close()
	})
	if sqlState(err) == "23505" {
		return h, berth.Errorf(berth.CodeInvalidState, "hotel %s exists already", h.ID)
	}
	return h, classify(err)
}

// catalogEvent is the full-state event of a hotel (with its room types).
func catalogEvent(h reservation.Hotel) event {
	return event{kind: berth.KindHotel, partitionID: h.ID, typ: reservation.EventCatalog, aggregateID: h.ID,
		version: h.CatalogVersion, data: h}
}

const hotelColumns = `hotel_id::TEXT, home_region, name, city, country, timezone, latitude, longitude,
	COALESCE(amenities, '{}'::TEXT[]), COALESCE(chain, ''), catalog_version, created_at`

func scanHotel(row pgx.Row) (reservation.Hotel, error) {
	var h reservation.Hotel
	err := row.Scan(&h.ID, &h.HomeRegion, &h.Name, &h.City, &h.Country, &h.Timezone, &h.Latitude, &h.Longitude,
		&h.Amenities, &h.Chain, &h.CatalogVersion, &h.CreatedAt)
	if h.Amenities == nil {
		h.Amenities = []string{}
	}
	h.CreatedAt = h.CreatedAt.UTC()
	return h, err
}

// GetHotel returns a hotel with its room types.
func (s *Store) GetHotel(ctx context.Context, hotelID string) (reservation.Hotel, error) {
	h, err := scanHotel(s.db.pool.QueryRow(ctx, `SELECT `+hotelColumns+` FROM hotels WHERE hotel_id = $1`, hotelID))
	if errors.Is(err, pgx.ErrNoRows) {
		return h, berth.Errorf(berth.CodeNotFound, "hotel %s not found", hotelID)
	}
	if err != nil {
		return h, classify(fmt.Errorf("get hotel: %w", err))
	}
	h.RoomTypes, err = roomTypesOf(ctx, s.db.pool, hotelID)
	return h, err
}

// UpdateHotel changes a hotel homed in this region and writes its
// hotel.catalog event in the same transaction.
func (s *Store) UpdateHotel(ctx context.Context, hotelID string, p reservation.HotelPatch) (reservation.Hotel, error) {
	resp, err := s.write(ctx, berth.KindHotel, hotelID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		var city, cityKey *string
		if p.City != nil {
			k := search.FoldCity(*p.City)
			city, cityKey = p.City, &k
		}
		_, err := tx.Exec(ctx, `UPDATE hotels SET name = COALESCE($2, name), city = COALESCE($3, city),
				city_key = COALESCE($4, city_key), country = COALESCE($5, country),
				latitude = CASE WHEN $6 THEN NULL ELSE COALESCE($7, latitude) END,
				longitude = CASE WHEN $6 THEN NULL ELSE COALESCE($8, longitude) END,
				amenities = CASE WHEN $9 THEN $10::TEXT[] ELSE amenities END,
				chain = CASE WHEN $11 THEN NULLIF($12, '') ELSE chain END
			WHERE hotel_id = $1`,
			hotelID, p.Name, city, cityKey, p.Country, p.ClearLocation, p.Latitude, p.Longitude, p.Amenities != nil, amenityArg(p.Amenities),
			p.Chain != nil, chainArg(p.Chain))
		if err != nil {
			return nil, fmt.Errorf("update hotel: %w", err)
		}
		return bumpCatalog(ctx, tx, b, s.region, hotelID)
	})
	if err != nil {
		return reservation.Hotel{}, err
	}
	return resp.Value.(reservation.Hotel), nil
}

func chainArg(c *string) string {
	if c == nil {
		return ""
	}
	return *c
}

func amenityArg(a *[]string) []string {
	if a == nil {
		return nil
	}
	return *a
}

// bumpCatalog bumps the hotel's catalog version, reads the hotel with its
// room types and queues its hotel.catalog event. The UPDATE locks the hotel
// row (after the placement row: the partition's lock order), so two catalog
// changes of one hotel serialize and each event holds the state its version
// names.
func bumpCatalog(ctx context.Context, tx pgx.Tx, b *pgx.Batch, region, hotelID string) (reservation.Hotel, error) {
	h, err := scanHotel(tx.QueryRow(ctx,
		`UPDATE hotels SET catalog_version = catalog_version + 1 WHERE hotel_id = $1 RETURNING `+hotelColumns, hotelID))
	if errors.Is(err, pgx.ErrNoRows) {
		return h, berth.Errorf(berth.CodeNotFound, "hotel %s not found", hotelID)
	}
	if err != nil {
		return h, fmt.Errorf("bump catalog version: %w", err)
	}
	if h.RoomTypes, err = roomTypesOf(ctx, tx, hotelID); err != nil {
		return h, err
	}
	return h, queueEvents(ctx, b, region, catalogEvent(h))
}

type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

func roomTypesOf(ctx context.Context, q querier, hotelID string) ([]reservation.RoomType, error) {
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

// CreateRoomType adds a room type to a hotel homed in this region, with the
// hotel's hotel.catalog event.
func (s *Store) CreateRoomType(ctx context.Context, rt reservation.RoomType) (reservation.RoomType, error) {
	_, err := s.write(ctx, berth.KindHotel, rt.HotelID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO room_types (hotel_id, room_type_id, home_region, name, max_guests, price_cents, currency, overbooking_pct, default_total_rooms)
			SELECT hotel_id, $2, home_region, $3, $4, $5, $6, $7, $8 FROM hotels WHERE hotel_id = $1`,
			rt.HotelID, rt.ID, rt.Name, rt.MaxGuests, rt.PriceCents, rt.Currency, rt.OverbookingPct, rt.DefaultTotalRooms); err != nil {
			return nil, fmt.Errorf("insert room type: %w", err)
		}
		return bumpCatalog(ctx, tx, b, s.region, rt.HotelID)
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
	_, err := s.write(ctx, berth.KindHotel, hotelID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
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
			counts, err := nightCounts(tx.Query(ctx,
				`INSERT INTO room_inventory (hotel_id, room_type_id, night, home_region, total_rooms, sell_limit, version)
				 SELECT $1, $2, d, $3, $4, $5, 1 FROM unnest($6::DATE[]) AS d
				 ON CONFLICT (hotel_id, room_type_id, night) DO NOTHING
				 RETURNING `+nightCountColumns,
				hotelID, roomTypeID, s.region, total, reservation.SellLimit(total, int(pct)), dates))
			if err != nil {
				return nil, fmt.Errorf("load nights: %w", err)
			}
			nights = len(counts)
			return nil, queueInventory(ctx, b, s.region, hotelID, roomTypeID, counts)
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
		counts, err := nightCounts(tx.Query(ctx,
			`INSERT INTO room_inventory AS i (hotel_id, room_type_id, night, home_region, total_rooms, sell_limit, version)
			 SELECT $1, $2, u.d, $3, $4, u.l, 1 FROM unnest($5::DATE[], $6::INT4[]) AS u(d, l)
			 ON CONFLICT (hotel_id, room_type_id, night)
			 DO UPDATE SET total_rooms = excluded.total_rooms, sell_limit = excluded.sell_limit, version = i.version + 1
			 RETURNING `+nightCountColumns,
			hotelID, roomTypeID, s.region, total, dates, limits))
		if err != nil {
			if constraintName(err) == "room_inventory_reserved_within_limit" {
				return nil, berth.Errorf(berth.CodeInvalidState, "a night has more rooms reserved than the new limit")
			}
			return nil, fmt.Errorf("set inventory: %w", err)
		}
		nights = len(counts)
		return nil, queueInventory(ctx, b, s.region, hotelID, roomTypeID, counts)
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

// nightCountColumns is the RETURNING list of every statement that changes
// room_inventory: each changed night as an inventory.changed event reports it.
const nightCountColumns = `night, GREATEST(sell_limit - reserved, 0), version`

// nightCounts collects the rows of a statement returning nightCountColumns.
func nightCounts(rows pgx.Rows, err error) ([]reservation.NightCount, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (reservation.NightCount, error) {
		var (
			night time.Time
			avail int32
			c     reservation.NightCount
		)
		err := row.Scan(&night, &avail, &c.Version)
		c.Night, c.Available = reservation.DateOf(night).String(), int(avail)
		return c, err
	})
}

// queueInventory queues the inventory.changed event of the nights a
// transaction changed (nothing when it changed none). Its aggregate is the
// room type; each night carries its own version, which is what orders them.
func queueInventory(ctx context.Context, b *pgx.Batch, region, hotelID, roomTypeID string, counts []reservation.NightCount) error {
	if len(counts) == 0 {
		return nil
	}
	var top int64
	for _, c := range counts {
		top = max(top, c.Version)
	}
	return queueEvents(ctx, b, region, event{kind: berth.KindHotel, partitionID: hotelID, typ: reservation.EventInventory,
		aggregateID: roomTypeID, version: top,
		data: reservation.InventoryChange{HotelID: hotelID, RoomTypeID: roomTypeID, Nights: counts}})
}
