package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/searchindex"
)

// emptyCatalog is a snapshot without hotels: the fuzzed index is filled by
// applying catalog states directly, as its consumer would.
type emptyCatalog struct{}

func (emptyCatalog) ScanCatalog(context.Context, func([]reservation.Hotel) error) error { return nil }
func (emptyCatalog) ScanInventory(context.Context, reservation.Date, func(reservation.RoomNights) error) error {
	return nil
}

// FuzzSearchQuery sends arbitrary query strings to the index search:
// never a panic or a 5xx; every answer is 200 with a page or a 4xx problem.
func FuzzSearchQuery(f *testing.F) {
	for _, q := range []string{
		"q=munchen", "q=Múnich&city=munich", "near=48.1,11.5&radius_km=5&sort=distance", "sort=price&max_price_cents=100",
		"check_in=2027-01-10&check_out=2027-01-12&guests=2", "amenities=wifi,pool", "near=91,0", "radius_km=1", "limit=0",
		"cursor=AAAA", "q=%00", "q=a&q=b", "sort=distance", ";;;&&&==",
	} {
		f.Add(q)
	}
	idx := searchindex.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := idx.Build(context.Background(), emptyCatalog{}); err != nil {
		f.Fatal(err)
	}
	lat, lon := 48.1, 11.5
	for i, name := range []string{"Bayerischer Hof", "Hotel Adlon", "Marriott"} {
		_, err := idx.ApplyHotel(reservation.Hotel{ID: "7d3c8f5e-0000-4000-8000-00000000000" + string(rune('1'+i)), Name: name,
			City: "München", Country: "DE", Latitude: &lat, Longitude: &lon, Amenities: []string{"wifi"}, CatalogVersion: 1,
			RoomTypes: []reservation.RoomType{{ID: "7d3c8f5e-0000-4000-8000-00000000010" + string(rune('1'+i)), Name: "D", MaxGuests: 2, PriceCents: 100, Currency: "EUR"}}})
		if err != nil {
			f.Fatal(err)
		}
	}
	s := New(Config{Region: "us-east", Hotels: queryStub{}, Search: idx, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) }})
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/hotels", nil)
		r.URL.RawQuery = rawQuery
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		switch {
		case w.Code == http.StatusOK:
			var page indexResponse
			if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || page.Hotels == nil {
				t.Fatalf("200 with a bad body %q: %v", w.Body.String(), err)
			}
		case w.Code >= 400 && w.Code < 500:
			if w.Header().Get("Content-Type") != ProblemContentType {
				t.Fatalf("%d without a problem document", w.Code)
			}
		default:
			t.Fatalf("query %q answered %d: %s", rawQuery, w.Code, w.Body.String())
		}
	})
}
