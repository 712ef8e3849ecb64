// Package seed generates catalogs in bulk with COPY: hotels with room types
// and a year of nightly inventory (up to 50,000 × 5 × 365 ≈ 91 M rows), and
// clinics with doctors and materialized slots, each partition homed in a
// region (round-robin) with its placements row.
package seed

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/search"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/sync/errgroup"
)

// Options shape a catalog.
type Options struct {
	Hotels, RoomTypes, Nights, Rooms int
	Clinics, Doctors, SlotDays       int // doctors per clinic; 24 slots per doctor-day
	Regions                          []string
	Workers                          int
	Chunk                            int       // hotels per COPY batch
	Progress                         io.Writer // nil: no bar
	KeepIDs                          bool      // return the hotels (small catalogs)
	// StartDay is the first night, as days from today (default 0).
	StartDay int
	// Searchable gives hotels the names, cities, locations, amenities,
	// guests and prices of SearchHotel and SearchRoom (a catalog worth
	// searching) instead of "Seed Hotel N" in twelve cities.
	Searchable bool
}

// Hotel is a seeded hotel.
type Hotel struct {
	ID, Region string
	RoomTypes  []string
}

// Result counts what was written.
type Result struct {
	Rows    map[string]int64 `json:"rows"`
	Elapsed time.Duration    `json:"-"`
	Seconds float64          `json:"seconds"`
	// InventoryRowsPerS is the headline rate.
	InventoryRowsPerS float64 `json:"inventory_rows_per_s"`
	Hotels            []Hotel `json:"-"`
}

var cityNames = []string{"Múnich", "Lisboa", "New York", "São Paulo", "Mumbai", "Zürich", "Kraków", "Singapore", "Paris", "Tōkyō", "Berlin", "Madrid"}

// Hotels writes the hotel catalog.
func Hotels(ctx context.Context, pool *pgxpool.Pool, o Options) (Result, error) {
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Chunk <= 0 {
		o.Chunk = 100
	}
	if len(o.Regions) == 0 {
		o.Regions = []string{"us-east", "eu-west", "ap-south"}
	}
	res := Result{Rows: map[string]int64{}}
	start := time.Now()
	total := int64(o.Hotels) * int64(o.RoomTypes) * int64(o.Nights)
	var bar *progressbar.ProgressBar
	if o.Progress != nil {
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(o.Progress), progressbar.OptionSetDescription("room_inventory"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"),
			progressbar.OptionThrottle(250*time.Millisecond), progressbar.OptionFullWidth(), progressbar.OptionOnCompletion(func() { fmt.Fprintln(o.Progress) }))
	}
	first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, o.StartDay)
	var (
		mu                              sync.Mutex
		nPlacements, nHotels, nRT, nInv atomic.Int64
		next                            atomic.Int64
	)
	g, ctx := errgroup.WithContext(ctx)
	for range o.Workers {
		g.Go(func() error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return fmt.Errorf("acquire: %w", err)
			}
			defer conn.Release()
			for {
				lo := int(next.Add(int64(o.Chunk))) - o.Chunk
				if lo >= o.Hotels {
					return nil
				}
				hi := min(lo+o.Chunk, o.Hotels)
				hotels := make([]Hotel, 0, hi-lo)
				for i := lo; i < hi; i++ {
					h := Hotel{ID: uuid.NewString(), Region: o.Regions[i%len(o.Regions)]}
					for range o.RoomTypes {
						h.RoomTypes = append(h.RoomTypes, uuid.NewString())
					}
					hotels = append(hotels, h)
				}
				if err := copyHotels(ctx, conn.Conn(), lo, hotels, o, first, bar, &nInv); err != nil {
					return err
				}
				nPlacements.Add(int64(len(hotels)))
				nHotels.Add(int64(len(hotels)))
				nRT.Add(int64(len(hotels) * o.RoomTypes))
				if o.KeepIDs {
					mu.Lock()
					res.Hotels = append(res.Hotels, hotels...)
					mu.Unlock()
				}
			}
		})
	}
	err := g.Wait()
	if bar != nil {
		_ = bar.Finish()
	}
	res.Rows["placements"], res.Rows["hotels"], res.Rows["room_types"], res.Rows["room_inventory"] =
		nPlacements.Load(), nHotels.Load(), nRT.Load(), nInv.Load()
	res.Elapsed = time.Since(start)
	res.Seconds = res.Elapsed.Seconds()
	res.InventoryRowsPerS = float64(nInv.Load()) / res.Seconds
	return res, err
}

func copyHotels(ctx context.Context, conn *pgx.Conn, offset int, hotels []Hotel, o Options, first time.Time,
	bar *progressbar.ProgressBar, nInv *atomic.Int64) error {
	// One transaction per chunk: a chunk is all there or not at all, so an
	// interrupted seed leaves no hotel without its inventory.
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		rows := make([][]any, 0, len(hotels))
		for _, h := range hotels {
			rows = append(rows, []any{"hotel", h.ID, h.Region})
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"placements"}, []string{"kind", "partition_id", "home_region"}, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("copy placements: %w", err)
		}
		rows = rows[:0]
		cols := []string{"hotel_id", "home_region", "name", "city", "city_key", "country", "timezone"}
		if o.Searchable {
			cols = append(cols, "latitude", "longitude", "amenities")
		}
		for i, h := range hotels {
			if o.Searchable {
				p := SearchHotel(offset + i)
				rows = append(rows, []any{h.ID, h.Region, p.Name, p.City, search.FoldCity(p.City), p.Country, "Europe/Berlin",
					p.Lat, p.Lon, p.Amenities})
				continue
			}
			city := cityNames[(offset+i)%len(cityNames)]
			rows = append(rows, []any{h.ID, h.Region, fmt.Sprintf("Seed Hotel %d", offset+i), city, search.FoldCity(city), "DE", "Europe/Berlin"})
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"hotels"}, cols, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("copy hotels: %w", err)
		}
		rows = rows[:0]
		for i, h := range hotels {
			for j, rt := range h.RoomTypes {
				guests, price := int32(2), int64(8000+1500*j)
				if o.Searchable {
					guests, price = SearchRoom(offset+i, j)
				}
				rows = append(rows, []any{h.ID, rt, h.Region, fmt.Sprintf("Type %d", j), guests, price, "EUR", int32(0)})
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"room_types"},
			[]string{"hotel_id", "room_type_id", "home_region", "name", "max_guests", "price_cents", "currency", "overbooking_pct"},
			pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("copy room types: %w", err)
		}
		src := &inventorySource{hotels: hotels, o: o, first: first, bar: bar}
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"room_inventory"},
			[]string{"hotel_id", "room_type_id", "night", "home_region", "total_rooms", "sell_limit", "reserved"}, src)
		if err != nil {
			return fmt.Errorf("copy room inventory: %w", err)
		}
		nInv.Add(n)
		return nil
	})
}

// inventorySource streams the nights of a chunk without materializing them.
type inventorySource struct {
	hotels    []Hotel
	o         Options
	first     time.Time
	bar       *progressbar.ProgressBar
	h, rt, n  int
	row       []any
	sinceTick int
}

func (s *inventorySource) Next() bool {
	if s.h >= len(s.hotels) {
		if s.bar != nil && s.sinceTick > 0 {
			_ = s.bar.Add(s.sinceTick)
			s.sinceTick = 0
		}
		return false
	}
	h := s.hotels[s.h]
	rooms := int32(s.o.Rooms)
	s.row = []any{h.ID, h.RoomTypes[s.rt], s.first.AddDate(0, 0, s.n), h.Region, rooms, rooms, int32(0)}
	s.n++
	if s.n == s.o.Nights {
		s.n = 0
		s.rt++
		if s.rt == len(h.RoomTypes) {
			s.rt = 0
			s.h++
		}
	}
	s.sinceTick++
	if s.bar != nil && s.sinceTick == 10000 {
		_ = s.bar.Add(s.sinceTick)
		s.sinceTick = 0
	}
	return true
}

func (s *inventorySource) Values() ([]any, error) { return s.row, nil }
func (s *inventorySource) Err() error             { return nil }
