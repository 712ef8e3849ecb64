package postgres

import (
	"context"
	"fmt"
	"time"

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
func (s *Store) ScanInventory(ctx context.Context, from reservation.Date, fn func(reservation.InventoryChange) error) error {
	afterH, afterR := zeroUUIDText, zeroUUIDText
	for {
		rows, err := s.db.pool.Query(ctx,
			`SELECT hotel_id::TEXT, room_type_id::TEXT FROM room_types
			 WHERE (hotel_id, room_type_id) > ($1::UUID, $2::UUID)
			 ORDER BY hotel_id, room_type_id LIMIT 200`, afterH, afterR)
		if err != nil {
			return classify(fmt.Errorf("scan inventory: %w", err))
		}
		var list []reservation.InventoryChange
		byRoom := map[string]int{}
		for rows.Next() {
			var c reservation.InventoryChange
			if err := rows.Scan(&c.HotelID, &c.RoomTypeID); err != nil {
				rows.Close()
				return classify(fmt.Errorf("scan inventory: %w", err))
			}
			byRoom[c.RoomTypeID] = len(list)
			list = append(list, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return classify(fmt.Errorf("scan inventory: %w", err))
		}
		if len(list) == 0 {
			return nil
		}
		hotels, rooms := make([]string, len(list)), make([]string, len(list))
		for i, c := range list {
			hotels[i], rooms[i] = c.HotelID, c.RoomTypeID
		}
		rows, err = s.db.pool.Query(ctx,
			`SELECT i.room_type_id::TEXT, i.night, GREATEST(i.sell_limit - i.reserved, 0), i.version
			 FROM unnest($1::UUID[], $2::UUID[]) AS rt(h, r)
			 JOIN room_inventory i ON i.hotel_id = rt.h AND i.room_type_id = rt.r AND i.night >= $3
			 ORDER BY i.hotel_id, i.room_type_id, i.night`, hotels, rooms, from.Time())
		if err != nil {
			return classify(fmt.Errorf("scan inventory: %w", err))
		}
		for rows.Next() {
			var (
				r     string
				night time.Time
				avail int32
				ver   int64
			)
			if err := rows.Scan(&r, &night, &avail, &ver); err != nil {
				rows.Close()
				return classify(fmt.Errorf("scan inventory: %w", err))
			}
			c := &list[byRoom[r]]
			c.Nights = append(c.Nights, reservation.NightCount{Night: reservation.DateOf(night).String(), Available: int(avail), Version: ver})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return classify(fmt.Errorf("scan inventory: %w", err))
		}
		for _, c := range list {
			if len(c.Nights) > 0 {
				if err := fn(c); err != nil {
					return err
				}
			}
		}
		last := list[len(list)-1]
		afterH, afterR = last.HotelID, last.RoomTypeID
	}
}

const zeroUUIDText = "00000000-0000-0000-0000-000000000000"
