package searchindex_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
)

// Free text over name and city tolerates case, accents and one or two
// typos, and ranks exact words above near misses; every hotel reached the
// index through its events.
func TestSearchText(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	room := []roomSpec{{"Double", 2, 10000, 5}}
	s.createHotel(hotelSpec{Name: "Bayerischer Hof", City: "München", Country: "DE", Rooms: room})
	s.createHotel(hotelSpec{Name: "Marriott Central", City: "Múnich", Country: "DE", Rooms: room})
	s.createHotel(hotelSpec{Name: "Hotel Adlon", City: "Berlin", Country: "DE", Rooms: room})
	s.createHotel(hotelSpec{Name: "Berlin Grand", City: "Berlin", Country: "DE", Rooms: room})
	s.createHotel(hotelSpec{Name: "Merlin Lodge", City: "Bern", Country: "CH", Rooms: room})
	s.settle()

	for _, tc := range []struct {
		q    string
		want []string // in order when ordered, else as a set
	}{
		{"munchen", []string{"Bayerischer Hof", "Marriott Central"}},
		{"MÜNCHEN", []string{"Bayerischer Hof", "Marriott Central"}},
		{"Muenchen", []string{"Bayerischer Hof", "Marriott Central"}},
		{"bayrischer hof", []string{"Bayerischer Hof"}}, // one edit in the name
		// "Munich" and "Múnich" are names of München (aliases.go): both
		// hotels, whichever name their city was entered with.
		{"munich", []string{"Bayerischer Hof", "Marriott Central"}},
		{"Múnich", []string{"Bayerischer Hof", "Marriott Central"}},
		{"Mnuich", []string{"Bayerischer Hof", "Marriott Central"}}, // two edits
		{"adlon berlin", []string{"Hotel Adlon"}},
		{"xyzzy", []string{}},
	} {
		got := s.search(q("q", tc.q)).names()
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("q=%q: got %v, want %v", tc.q, got, tc.want)
		}
	}

	// Relevance: the hotel with "berlin" in its name and its city first,
	// then the other Berlin hotel, then the one-edit match ("Merlin").
	got := s.search(q("q", "berlin")).names()
	if len(got) != 3 || got[0] != "Berlin Grand" || got[1] != "Hotel Adlon" || got[2] != "Merlin Lodge" {
		t.Errorf("q=berlin ranked %v; want [Berlin Grand, Hotel Adlon, Merlin Lodge]", got)
	}
	// The existing exact city filter still ignores case and accents only.
	if got := s.search(q("city", "MUNICH")).names(); !slices.Equal(got, []string{"Marriott Central"}) {
		t.Errorf("city=MUNICH: %v", got)
	}
	if got := s.search(q("city", "munchn")).names(); len(got) != 0 {
		t.Errorf("city=munchn is an exact filter, found %v", got)
	}
}

// Cities are found by the names they have in other languages: "munich"
// finds a hotel in München (three edits away, beyond any typo tolerance),
// "cologne" one in Köln, and so on, with typos in the exonym forgiven too;
// a renamed city takes its new names along; the city filter stays exact.
func TestSearchCityAliases(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	room := []roomSpec{{"Double", 2, 10000, 5}}
	for _, h := range [][2]string{
		{"Hotel Vier Jahreszeiten", "München"}, {"Dom Hotel", "Köln"}, {"Hotel Sacher", "Wien"},
		{"Hotel Paris Prag", "Praha"}, {"Pestana Palace", "Lisboa"}, {"Hotel Lungarno", "Firenze"},
		{"Hotel Monaco", "Monaco"}, {"Hotel Berlin", "Berlin"},
	} {
		s.createHotel(hotelSpec{Name: h[0], City: h[1], Country: "DE", Rooms: room})
	}
	s.settle()
	for _, tc := range []struct {
		q    string
		want []string // as a set
	}{
		{"munich", []string{"Hotel Vier Jahreszeiten"}},
		{"Múnich", []string{"Hotel Vier Jahreszeiten"}},
		{"munchen", []string{"Hotel Vier Jahreszeiten"}},
		{"MUNIC", []string{"Hotel Vier Jahreszeiten"}}, // a typo of an exonym
		{"monaco di baviera", []string{"Hotel Vier Jahreszeiten"}},
		{"monaco", []string{"Hotel Monaco", "Hotel Vier Jahreszeiten"}},
		{"cologne", []string{"Dom Hotel"}},
		{"vienna", []string{"Hotel Sacher"}},
		{"sacher vienna", []string{"Hotel Sacher"}},
		{"prague", []string{"Hotel Paris Prag"}},
		{"lisbon", []string{"Pestana Palace"}},
		{"florence", []string{"Hotel Lungarno"}},
		{"berlino", []string{"Hotel Berlin"}}, // one edit from Berlin: the typo tolerance, not the table
		{"xyzzy", []string{}},
	} {
		got := s.search(q("q", tc.q)).names()
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("q=%q: got %v, want %v", tc.q, got, tc.want)
		}
	}
	// The exact city filter does not follow aliases: it names one spelling.
	if got := s.search(q("city", "munich")).names(); len(got) != 0 {
		t.Errorf("city=munich found %v; the filter is exact", got)
	}
	// A hotel that moves to Wien is found as in Vienna from then on.
	id, _ := s.createHotel(hotelSpec{Name: "Pension Nord", City: "Graz", Country: "AT", Rooms: room})
	s.settle()
	if got := s.search(q("q", "nord vienna")).names(); len(got) != 0 {
		t.Errorf("q=nord vienna before the move: %v", got)
	}
	r := s.Do(bookingtest.Request{Method: "PATCH", Path: "/v1/hotels/" + id, Token: s.admin, Body: map[string]any{"city": "Wien"}})
	if r.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	s.settle()
	if got := s.search(q("q", "nord vienna")).names(); !slices.Equal(got, []string{"Pension Nord"}) {
		t.Errorf("q=nord vienna after the move: %v", got)
	}
}

// A hotel created, then renamed, is found by its new name and no longer by
// its old one: catalog changes flow through their full-state events.
func TestSearchFollowsCatalogChanges(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, _ := s.createHotel(hotelSpec{Name: "Pension Sonne", City: "Graz", Country: "AT"})
	s.eventually("the new hotel in search", func() bool { return len(s.search(q("q", "sonne")).Hotels) == 1 })
	r := s.Do(bookingtest.Request{Method: "PATCH", Path: "/v1/hotels/" + id, Token: s.admin,
		Body: map[string]any{"name": "Pension Mond", "amenities": []string{"Wifi", "parking"}}})
	if r.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	s.settle()
	if got := s.search(q("q", "sonne")).names(); len(got) != 0 {
		t.Errorf("old name still found: %v", got)
	}
	res := s.search(q("q", "mond", "amenities", "wifi"))
	if len(res.Hotels) != 1 || !slices.Equal(res.Hotels[0].Amenities, []string{"parking", "wifi"}) {
		t.Errorf("renamed hotel: %+v", res.Hotels)
	}
}

// The filters combine: dates (a room type free every night, from the
// availability summary the inventory events keep), guests, price,
// amenities, city and a radius; the orders are relevance, price and
// distance; pages are disjoint and complete.
func TestSearchFilters(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	munich := func(dLat, dLon float64) (*float64, *float64) { return ll(48.137+dLat, 11.575+dLon) }
	lat, lon := munich(0, 0)
	center, centerRooms := s.createHotel(hotelSpec{Name: "Zentrum", City: "München", Country: "DE", Lat: lat, Lon: lon,
		Amenities: []string{"wifi", "pool"}, Rooms: []roomSpec{{"Double", 2, 12000, 1}, {"Family", 4, 20000, 3}}})
	lat, lon = munich(0.05, 0) // ~5.6 km north
	north, _ := s.createHotel(hotelSpec{Name: "Schwabing", City: "München", Country: "DE", Lat: lat, Lon: lon,
		Amenities: []string{"wifi"}, Rooms: []roomSpec{{"Double", 2, 9000, 2}}})
	lat, lon = munich(0.3, 0) // ~33 km north
	far, _ := s.createHotel(hotelSpec{Name: "Freising", City: "Freising", Country: "DE", Lat: lat, Lon: lon,
		Rooms: []roomSpec{{"Single", 1, 5000, 2}}})
	s.settle()

	ids := func(r result) []string {
		out := []string{}
		for _, h := range r.Hotels {
			out = append(out, h.ID)
		}
		return out
	}
	in, out := bookingtest.Date(3), bookingtest.Date(6)
	for _, tc := range []struct {
		name   string
		params []string
		want   []string // in order
	}{
		{"guests", []string{"guests", "3"}, []string{center}},
		{"price", []string{"max_price_cents", "9500", "sort", "price"}, []string{far, north}},
		{"amenities", []string{"amenities", "pool,wifi"}, []string{center}},
		{"city and guests", []string{"city", "munchen", "guests", "2"}, []string{center, north}},
		{"near", []string{"near", "48.137,11.575", "radius_km", "10", "sort", "distance"}, []string{center, north}},
		{"near wide", []string{"near", "48.137,11.575", "radius_km", "50", "sort", "distance"}, []string{center, north, far}},
		{"sort price", []string{"sort", "price"}, []string{far, north, center}},
		{"dates", []string{"check_in", in, "check_out", out, "guests", "2"}, []string{center, north}},
	} {
		got := ids(s.search(q(tc.params...)))
		if tc.name == "city and guests" || tc.name == "dates" {
			slices.Sort(got)
			slices.Sort(tc.want)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}

	// Dates: take the center's only double for one night of the stay; the
	// hold's inventory event takes the double out of that search, and the
	// family room (4 guests) still qualifies for 2 guests.
	r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + center + "/reservations", Token: s.admin,
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g1", "room_type_id": centerRooms[0],
			"check_in": bookingtest.Date(4), "check_out": bookingtest.Date(5), "quantity": 1}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	s.settle()
	res := s.search(q("check_in", in, "check_out", out, "near", "48.137,11.575", "radius_km", "1"))
	if len(res.Hotels) != 1 || len(res.Hotels[0].RoomTypes) != 1 || res.Hotels[0].RoomTypes[0].ID != centerRooms[1] ||
		*res.Hotels[0].RoomTypes[0].Available != 3 {
		t.Fatalf("after the hold: %+v", res.Hotels)
	}
	// No room of the family type either on night 5: the center drops out.
	s.setRooms(center, centerRooms[1], 5, 6, 0)
	s.settle()
	if got := ids(s.search(q("check_in", in, "check_out", out, "city", "München"))); !slices.Equal(got, []string{north}) {
		t.Errorf("after closing a night: %v, want only %s", got, north)
	}
	// Outside the loaded nights nothing is free.
	if got := s.search(q("check_in", bookingtest.Date(40), "check_out", bookingtest.Date(41))).Hotels; len(got) != 0 {
		t.Errorf("nights without inventory: %d hotels", len(got))
	}

	// Pages: one hotel at a time in price order, until the cursor ends.
	var seen []string
	params := q("sort", "price", "limit", "1")
	for range 5 {
		res := s.search(params)
		seen = append(seen, ids(res)...)
		if res.NextCursor == nil {
			break
		}
		params.Set("cursor", *res.NextCursor)
	}
	if !slices.Equal(seen, []string{far, north, center}) {
		t.Errorf("pages: %v", seen)
	}
}

// Bad parameters are a 400 invalid_request naming the field.
func TestSearchBadParameters(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	for _, p := range []string{
		"near=91,10", "near=abc", "near=48.1", "radius_km=5", "near=48,11&radius_km=0", "near=48,11&radius_km=nan",
		"sort=distance", "sort=name", "amenities=wi%20fi", "guests=0", "max_price_cents=-1", "limit=101",
		"check_in=" + bookingtest.Date(3), "check_in=" + bookingtest.Date(3) + "&check_out=" + bookingtest.Date(2),
		"q=%00", "cursor=abc", "q=a&q=b", "color=red",
	} {
		r := s.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels?" + p})
		if r.Status != http.StatusBadRequest || r.Code() != "invalid_request" {
			t.Errorf("%s: %d %s", p, r.Status, r.Body)
		}
	}
	// A cursor of another search is refused too.
	s.createHotel(hotelSpec{Name: "A", City: "X", Country: "DE"})
	s.createHotel(hotelSpec{Name: "B", City: "X", Country: "DE"})
	s.settle()
	res := s.search(q("city", "x", "limit", "1"))
	if res.NextCursor == nil {
		t.Fatal("no cursor")
	}
	r := s.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels?city=y&limit=1&cursor=" + *res.NextCursor})
	if r.Status != http.StatusBadRequest {
		t.Errorf("foreign cursor: %d", r.Status)
	}
}
