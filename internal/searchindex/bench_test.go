package searchindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/reservation"
)

// memSource is a generated catalog for the benchmarks: n hotels in 200
// cities, two room types each, nights nights loaded.
type memSource struct {
	n, nights int
}

var benchCities = func() []string {
	base := []string{"München", "Berlin", "Hamburg", "Köln", "Wien", "Zürich", "Paris", "Lyon", "Madrid", "Sevilla"}
	out := make([]string, 0, 200)
	for i := range 200 {
		out = append(out, fmt.Sprintf("%s %d", base[i%len(base)], i/len(base)))
	}
	return out
}()

var benchWords = []string{"Grand", "Central", "Park", "Royal", "Plaza", "Garden", "Palace", "Station", "Harbour", "Old Town"}

func (m memSource) hotel(i int) reservation.Hotel {
	lat, lon := 40+float64(i%1000)/100, float64(i%1500)/100
	h := reservation.Hotel{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Name: fmt.Sprintf("%s Hotel %d", benchWords[i%len(benchWords)], i),
		City: benchCities[i%len(benchCities)], Country: "DE", Latitude: &lat, Longitude: &lon, Amenities: []string{"wifi"}, CatalogVersion: 1}
	for k := range 2 {
		h.RoomTypes = append(h.RoomTypes, reservation.RoomType{ID: fmt.Sprintf("00000000-0000-4000-9%03d-%012d", k, i), HotelID: h.ID,
			Name: "Room", MaxGuests: 2 + 2*k, PriceCents: int64(5000 + (i*37+k*1000)%20000), Currency: "EUR"})
	}
	return h
}

func (m memSource) ScanCatalog(_ context.Context, fn func([]reservation.Hotel) error) error {
	for i := 0; i < m.n; i += 1000 {
		page := make([]reservation.Hotel, 0, 1000)
		for j := i; j < min(i+1000, m.n); j++ {
			page = append(page, m.hotel(j))
		}
		if err := fn(page); err != nil {
			return err
		}
	}
	return nil
}

func (m memSource) ScanInventory(_ context.Context, _ reservation.Date, fn func(reservation.RoomNights) error) error {
	for i := range m.n {
		h := m.hotel(i)
		for _, rt := range h.RoomTypes {
			c := reservation.RoomNights{HotelID: h.ID, RoomTypeID: rt.ID}
			for d := range m.nights {
				c.Offsets = append(c.Offsets, int32(d))
				c.Available = append(c.Available, int32((i+d)%4))
				c.Versions = append(c.Versions, 1)
			}
			if err := fn(c); err != nil {
				return err
			}
		}
	}
	return nil
}

func heapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

func benchIndex(b *testing.B, n int) *Index {
	b.Helper()
	before := heapMB()
	x := New(nil)
	start := time.Now()
	if err := x.Build(context.Background(), memSource{n: n, nights: 60}); err != nil {
		b.Fatal(err)
	}
	b.Logf("build of %d hotels (60 nights each of 2 room types): %s, heap +%.0f MiB", n, time.Since(start).Round(time.Millisecond), heapMB()-before)
	return x
}

// go test -run '^$' -bench BenchmarkSearch -benchtime 2000x ./internal/search/
func BenchmarkSearch(b *testing.B) {
	x := benchIndex(b, 50_000)
	defer x.Close()
	in := today().AddDays(3)
	stay := reservation.Stay{CheckIn: in, CheckOut: in.AddDays(2)}
	queries := []Query{
		{Text: "grand munchen", Limit: 20},
		{Text: "berln", Limit: 20},
		{City: "paris 3", Stay: &stay, Guests: 2, Limit: 20},
		{Near: &Point{45, 7}, RadiusKm: 20, Sort: SortDistance, Limit: 20},
		{Text: "palace", Sort: SortPrice, Stay: &stay, Limit: 20},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for b.Loop() {
		q := queries[rng.IntN(len(queries))]
		if _, err := x.Search(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
}
