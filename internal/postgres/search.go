package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/berthhq/berth/internal/search"
)

// searchSQL pages through the city's hotels in hotel_id order
// (hotels_city_key_idx, then a sort of that city's ids) and keeps a hotel
// only when one of its room types qualifies; the qualifying room types come
// from a lateral query over the inventory primary key
// (hotel_id, room_type_id, night). A night without inventory counts as zero,
// so a room type qualifies only when every night has a row with a room left.
// Plain SQL that runs as is on PostgreSQL and CockroachDB.
//
// $1 city_key, $2 after (UUID or NULL), $3 check_in, $4 check_out,
// $5 guests, $6 max price, $7 nights, $8 hotels to return.
const searchSQL = `
SELECT h.hotel_id::TEXT, h.name, h.city, q.room_type_id::TEXT, q.name, q.available, q.price_cents, q.currency
FROM (
	SELECT hotel_id, name, city FROM hotels
	WHERE city_key = $1 AND ($2::UUID IS NULL OR hotel_id > $2::UUID)
	  AND EXISTS (
		SELECT 1 FROM room_types rt
		WHERE rt.hotel_id = hotels.hotel_id AND rt.max_guests >= $5 AND rt.price_cents <= $6
		  AND (SELECT count(*) FROM room_inventory i
		       WHERE i.hotel_id = rt.hotel_id AND i.room_type_id = rt.room_type_id
		         AND i.night >= $3 AND i.night < $4 AND i.sell_limit - i.reserved >= 1) = $7)
	ORDER BY hotel_id
	LIMIT $8
) h
CROSS JOIN LATERAL (
	SELECT rt.room_type_id, rt.name, rt.price_cents, rt.currency, min(i.sell_limit - i.reserved) AS available
	FROM room_types rt
	JOIN room_inventory i ON i.hotel_id = rt.hotel_id AND i.room_type_id = rt.room_type_id
	     AND i.night >= $3 AND i.night < $4
	WHERE rt.hotel_id = h.hotel_id AND rt.max_guests >= $5 AND rt.price_cents <= $6
	GROUP BY rt.room_type_id, rt.name, rt.price_cents, rt.currency
	HAVING count(*) = $7 AND min(i.sell_limit - i.reserved) >= 1
) q
ORDER BY h.hotel_id, q.price_cents, q.room_type_id`

// searchArgs returns the arguments of searchSQL for q.
func searchArgs(q search.Query) []any {
	var after any
	if q.After != "" {
		after = q.After
	}
	maxPrice := int64(math.MaxInt64)
	if q.MaxPriceCents != nil {
		maxPrice = *q.MaxPriceCents
	}
	return []any{search.FoldCity(q.City), after, q.Stay.CheckIn.Time(), q.Stay.CheckOut.Time(),
		max(q.Guests, 1), maxPrice, q.Stay.Nights(), q.Limit + 1}
}

// SearchHotels answers a hotel search from the indexes. It reads the local
// database (a follower read on a follower-read store) and never feeds a write.
func (s *Store) SearchHotels(ctx context.Context, q search.Query) (search.Page, error) {
	page := search.Page{Hotels: []search.Hotel{}}
	if q.Limit < 1 {
		return page, fmt.Errorf("search hotels: limit %d", q.Limit)
	}
	rows, err := s.db.pool.Query(ctx, searchSQL, searchArgs(q)...)
	if err != nil {
		return page, classify(fmt.Errorf("search hotels: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			h     search.Hotel
			rt    search.RoomType
			avail int64
		)
		if err := rows.Scan(&h.ID, &h.Name, &h.City, &rt.RoomTypeID, &rt.Name, &avail, &rt.PriceCents, &rt.Currency); err != nil {
			return page, classify(fmt.Errorf("search hotels: %w", err))
		}
		rt.Available = int(avail)
		if n := len(page.Hotels); n == 0 || page.Hotels[n-1].ID != h.ID {
			h.RoomTypes = []search.RoomType{}
			page.Hotels = append(page.Hotels, h)
		}
		last := &page.Hotels[len(page.Hotels)-1]
		last.RoomTypes = append(last.RoomTypes, rt)
	}
	if err := rows.Err(); err != nil {
		return page, classify(fmt.Errorf("search hotels: %w", err))
	}
	if len(page.Hotels) > q.Limit {
		page.Hotels, page.More = page.Hotels[:q.Limit], true
	}
	return page, nil
}
