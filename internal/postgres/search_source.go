package postgres

import (
	"context"
	"fmt"

	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// ScanCatalog calls fn with every hotel of every region, with its room
// types, in pages in hotel id order: the snapshot a search index is built
// from. It runs once per build, never per search.
func (s *Store) ScanCatalog(ctx context.Context, fn func([]reservation.Hotel) error) error {
	after := zeroUUIDText
	for {
		rows, err := s.db.pool.Query(ctx,
			`SELECT `+hotelColumns+` FROM hotels WHERE hotel_id > $1::UUID ORDER BY hotel_id LIMIT 1000`, after)
		if err != nil {
			return classify(fmt.Errorf("scan catalog: %w", err))
		}
		page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (reservation.Hotel, error) { return scanHotel(row) })
		if err != nil {
			return classify(fmt.Errorf("scan catalog: %w", err))
		}
		if len(page) == 0 {
			return nil
		}
		index := make(map[string]int, len(page))
		ids := make([]string, len(page))
		for i := range page {
			page[i].RoomTypes = []reservation.RoomType{}
			index[page[i].ID], ids[i] = i, page[i].ID
		}
		rows, err = s.db.pool.Query(ctx,
			`SELECT room_type_id::TEXT, hotel_id::TEXT, name, max_guests, price_cents, currency, overbooking_pct, default_total_rooms
			 FROM room_types WHERE hotel_id = ANY($1::UUID[]) ORDER BY hotel_id, name, room_type_id`, ids)
		if err != nil {
			return classify(fmt.Errorf("scan room types: %w", err))
		}
		rts, err := pgx.CollectRows(rows, scanRoomType)
		if err != nil {
			return classify(fmt.Errorf("scan room types: %w", err))
		}
		for _, rt := range rts {
			h := &page[index[rt.HotelID]]
			h.RoomTypes = append(h.RoomTypes, rt)
		}
		if err := fn(page); err != nil {
			return err
		}
		after = page[len(page)-1].ID
	}
}

// ScanInventory calls fn with the nights from `from` on of every room type
// of every region, one room type at a time: the availability snapshot of a
// search index build.
//
// The nights are aggregated per room type in the database (three arrays
// over the horizon, in the primary key's order) and read in keyset pages of
// room types: one row per room type instead of one per night, so a
// snapshot of millions of nights is a few hundred round trips of compact
// binary arrays rather than millions of rows with a date each. Pages are
// not one transaction: every night carries its version and the index
// merges by it, so a night changed between two pages is either read new
// here or arrives by its event — never lost, never set back.
func (s *Store) ScanInventory(ctx context.Context, from reservation.Date, fn func(reservation.RoomNights) error) error {
	const page = 2000
	afterH, afterR := zeroUUIDText, zeroUUIDText
	for {
		// A page of room types by their primary key, each with its nights
		// gathered by a lateral look-up in room_inventory's primary key: an
		// index range per room type, never a scan of the whole table.
		rows, err := s.db.pool.Query(ctx,
			`SELECT rt.hotel_id::TEXT, rt.room_type_id::TEXT, n.offsets, n.available, n.versions
			 FROM room_types rt, LATERAL (
			   SELECT array_agg((i.night - $3::DATE)::INT4 ORDER BY i.night) AS offsets,
			          array_agg(GREATEST(i.sell_limit - i.reserved, 0)::INT4 ORDER BY i.night) AS available,
			          array_agg(i.version::INT8 ORDER BY i.night) AS versions
			   FROM room_inventory i
			   WHERE i.hotel_id = rt.hotel_id AND i.room_type_id = rt.room_type_id AND i.night >= $3::DATE) AS n
			 WHERE (rt.hotel_id, rt.room_type_id) > ($1::UUID, $2::UUID)
			 ORDER BY rt.hotel_id, rt.room_type_id LIMIT $4`, afterH, afterR, from.Time(), page)
		if err != nil {
			return classify(fmt.Errorf("scan inventory: %w", err))
		}
		n := 0
		for rows.Next() {
			var c reservation.RoomNights
			if err := rows.Scan(&c.HotelID, &c.RoomTypeID, &c.Offsets, &c.Available, &c.Versions); err != nil {
				rows.Close()
				return classify(fmt.Errorf("scan inventory: %w", err))
			}
			if len(c.Offsets) != len(c.Available) || len(c.Offsets) != len(c.Versions) {
				rows.Close()
				return fmt.Errorf("scan inventory: room type %s: arrays of different lengths", c.RoomTypeID)
			}
			afterH, afterR = c.HotelID, c.RoomTypeID
			n++
			if len(c.Offsets) == 0 {
				continue // no nights from `from` on (the arrays are NULL)
			}
			if err := fn(c); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return classify(fmt.Errorf("scan inventory: %w", err))
		}
		if n < page {
			return nil
		}
	}
}

const zeroUUIDText = "00000000-0000-0000-0000-000000000000"
