package searchindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/search"
	"github.com/blevesearch/bleve/v2"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Sort orders.
const (
	SortRelevance = "relevance"
	SortPrice     = "price"
	SortDistance  = "distance"
)

// MaxCandidates bounds the hotels a search considers: the best matches of
// the text and geographic part in the requested order, before the guest,
// price and date filters (which the catalog and the summary answer). A
// broader query than that is answered from its best candidates.
const MaxCandidates = 1000

// Point is a location in WGS 84 degrees.
type Point struct{ Lat, Lon float64 }

// Query is one hotel search; zero fields do not filter.
type Query struct {
	Text          string // free text over name and city
	City          string // exact city, case and accents ignored
	Stay          *reservation.Stay
	Guests        int    // 0: any room type
	MaxPriceCents *int64 // per night
	Near          *Point
	RadiusKm      float64 // with Near
	Amenities     []string
	Sort          string // SortRelevance (default), SortPrice, SortDistance (needs Near)
	After         *Cursor
	Limit         int
}

// Cursor is where a page ends: the sort key and id of its last hotel.
type Cursor struct {
	Key float64
	ID  string
}

// Hotel is one hotel of a page.
type Hotel struct {
	ID         string     `json:"hotel_id"`
	Name       string     `json:"name"`
	City       string     `json:"city"`
	Country    string     `json:"country"`
	Latitude   *float64   `json:"latitude,omitempty"`
	Longitude  *float64   `json:"longitude,omitempty"`
	Amenities  []string   `json:"amenities"`
	DistanceKm *float64   `json:"distance_km,omitempty"`
	RoomTypes  []RoomType `json:"room_types"`
	key        float64
}

// RoomType is a room type that qualifies; Available is the least left over
// the nights of the stay (absent without dates).
type RoomType struct {
	RoomTypeID string `json:"room_type_id"`
	Name       string `json:"name"`
	MaxGuests  int    `json:"max_guests"`
	Available  *int   `json:"available,omitempty"`
	PriceCents int64  `json:"price_cents"`
	Currency   string `json:"currency"`
}

// Page is a page of hotels; Next is set when there may be more.
type Page struct {
	Hotels []Hotel
	Next   *Cursor
}

// Search answers q from the index, the catalog and the summary.
func (x *Index) Search(ctx context.Context, q Query) (Page, error) {
	page := Page{Hotels: []Hotel{}}
	if !x.ready.Load() {
		return page, ErrNotReady
	}
	if q.Limit < 1 {
		return page, fmt.Errorf("search: limit %d", q.Limit)
	}
	if q.Sort == SortDistance && q.Near == nil {
		return page, errors.New("search: sort by distance needs a point")
	}
	bq, err := x.bleveQuery(q)
	if err != nil {
		return page, err
	}
	// The candidates are ordered by one key: a tie-break on the hotel id
	// here would read every match's id from the index (the cost grows with
	// the matches, not the page), and the page is ordered by (key, id)
	// below anyway. Ties at the cut of MaxCandidates fall in the index's
	// own order, the same for every search of a stable index. Orders other
	// than relevance need no score at all.
	req := bleve.NewSearchRequestOptions(bq, MaxCandidates, 0, false)
	switch q.Sort {
	case SortDistance:
		geo, err := bsearch.NewSortGeoDistance(fieldLocation, "km", q.Near.Lon, q.Near.Lat, false)
		if err != nil {
			return page, fmt.Errorf("search: %w", err)
		}
		req.SortByCustom(bsearch.SortOrder{geo})
		req.Score = bleve.ScoreNone
	case SortPrice:
		req.SortBy([]string{fieldMinPrice})
		req.Score = bleve.ScoreNone
	default:
		req.SortBy([]string{"-_score"})
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	res, err := x.alias.SearchInContext(ctx, req)
	if err != nil {
		return page, fmt.Errorf("search: %w", err)
	}
	var from, to int32
	if q.Stay != nil {
		from, to = dayNumber(q.Stay.CheckIn), dayNumber(q.Stay.CheckOut)
	}
	filtered := q.Stay != nil || q.Guests > 0 || q.MaxPriceCents != nil
	// qualifies reports whether room type rt passes the guest, price and
	// date filters, and how many rooms of it are left over the stay.
	qualifies := func(rt *reservation.RoomType) (int, bool) {
		if rt.MaxGuests < q.Guests || (q.MaxPriceCents != nil && rt.PriceCents > *q.MaxPriceCents) {
			return 0, false
		}
		if q.Stay == nil {
			return 0, true
		}
		left, ok := x.sum.minFree(rt.ID, from, to)
		return left, ok && left >= 1
	}
	// Every candidate gets its sort key; only the hotels of the page are
	// built (a search considers up to MaxCandidates for a page of 20).
	// The key of the relevance and distance orders does not depend on the
	// filters, so a candidate is checked against them only when the page
	// reaches it; the price order's key is the lowest qualifying price.
	type candidate struct {
		h   *reservation.Hotel
		key float64
	}
	cands := make([]candidate, 0, len(res.Hits))
	for _, hit := range res.Hits {
		h := x.cat.get(hit.ID)
		if h == nil {
			continue
		}
		c := candidate{h: h}
		switch q.Sort {
		case SortDistance:
			c.key = math.Inf(1)
			if h.Latitude != nil && h.Longitude != nil {
				c.key = distanceKm(*q.Near, Point{*h.Latitude, *h.Longitude})
			}
		case SortPrice:
			c.key = math.Inf(1)
			for i := range h.RoomTypes {
				if _, ok := qualifies(&h.RoomTypes[i]); ok {
					c.key = min(c.key, float64(h.RoomTypes[i].PriceCents))
				}
			}
			if filtered && math.IsInf(c.key, 1) {
				continue // no room type qualifies
			}
		default:
			c.key = -hit.Score
		}
		cands = append(cands, c)
	}
	// Keyset order: (key, id) ascending. The cursor names the last hotel
	// of the previous page; a page is what follows it.
	slices.SortFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.h.ID, b.h.ID))
	})
	start := 0
	if q.After != nil {
		start, _ = slices.BinarySearchFunc(cands, *q.After, func(c candidate, cur Cursor) int {
			return cmp.Or(cmp.Compare(c.key, cur.Key), cmp.Compare(c.h.ID, cur.ID))
		})
		if start < len(cands) && cands[start].key == q.After.Key && cands[start].h.ID == q.After.ID {
			start++
		}
	}
	hits := make([]Hotel, 0, q.Limit+1)
	for _, c := range cands[start:] {
		if len(hits) > q.Limit {
			break
		}
		h := c.h
		out := Hotel{ID: h.ID, Name: h.Name, City: h.City, Country: h.Country, Latitude: h.Latitude,
			Longitude: h.Longitude, Amenities: h.Amenities, RoomTypes: []RoomType{}, key: c.key}
		for i := range h.RoomTypes {
			rt := &h.RoomTypes[i]
			left, ok := qualifies(rt)
			if !ok {
				continue
			}
			r := RoomType{RoomTypeID: rt.ID, Name: rt.Name, MaxGuests: rt.MaxGuests, PriceCents: rt.PriceCents, Currency: rt.Currency}
			if q.Stay != nil {
				r.Available = &left
			}
			out.RoomTypes = append(out.RoomTypes, r)
		}
		if filtered && len(out.RoomTypes) == 0 {
			continue
		}
		if q.Near != nil && h.Latitude != nil && h.Longitude != nil {
			d := distanceKm(*q.Near, Point{*h.Latitude, *h.Longitude})
			out.DistanceKm = &d
		}
		slices.SortFunc(out.RoomTypes, func(a, b RoomType) int {
			return cmp.Or(cmp.Compare(a.PriceCents, b.PriceCents), cmp.Compare(a.RoomTypeID, b.RoomTypeID))
		})
		hits = append(hits, out)
	}
	if len(hits) > q.Limit {
		last := hits[q.Limit-1]
		page.Next = &Cursor{Key: last.key, ID: last.ID}
		hits = hits[:q.Limit]
	}
	page.Hotels = hits
	return page, nil
}

// bleveQuery is the text, city, amenity and geographic part of q.
func (x *Index) bleveQuery(q Query) (query.Query, error) {
	var parts []query.Query
	if q.Text != "" {
		tq, err := x.textQuery(q.Text)
		if err != nil {
			return nil, err
		}
		if tq != nil {
			parts = append(parts, tq)
		}
	}
	if q.City != "" {
		t := bleve.NewTermQuery(search.FoldCity(q.City))
		t.SetField(fieldCityKey)
		parts = append(parts, t)
	}
	for _, a := range q.Amenities {
		t := bleve.NewTermQuery(a)
		t.SetField(fieldAmenities)
		parts = append(parts, t)
	}
	if q.Near != nil {
		g := bleve.NewGeoDistanceQuery(q.Near.Lon, q.Near.Lat, strconv.FormatFloat(q.RadiusKm, 'f', -1, 64)+"km")
		g.SetField(fieldLocation)
		parts = append(parts, g)
	}
	switch len(parts) {
	case 0:
		return bleve.NewMatchAllQuery(), nil
	case 1:
		return parts[0], nil
	}
	return bleve.NewConjunctionQuery(parts...), nil
}

// textQuery matches every word of the text in the name, the city or one of
// the city's other names (aliases.go): the word itself (scored higher) or,
// for words of three letters or more, a word within one edit (three to
// five letters) or two edits (longer) — "munchen" finds "München",
// "Múnich" finds "Munich", "barcelna" finds "Barcelona", and "munich" or
// "munic" finds "München" through its exonyms. Words are folded by the
// index's own analyzer.
//
// Near misses are looked up once per word, in the text field that holds
// all three: a fuzzy query builds a Levenshtein automaton for its word
// (most of a search's allocations), and one per field made it three.
func (x *Index) textQuery(text string) (query.Query, error) {
	an := x.mapping.AnalyzerNamed(textAnalyzer)
	if an == nil {
		return nil, errors.New("search: no text analyzer")
	}
	tokens := an.Analyze([]byte(text))
	var words []query.Query
	seen := map[string]bool{}
	for _, t := range tokens {
		w := string(t.Term)
		if seen[w] {
			continue
		}
		seen[w] = true
		var alts []query.Query
		for _, field := range []string{fieldName, fieldCity, fieldCityAlias} {
			exact := bleve.NewTermQuery(w)
			exact.SetField(field)
			exact.SetBoost(3)
			alts = append(alts, exact)
		}
		if n := fuzziness(w); n > 0 {
			fz := bleve.NewFuzzyQuery(w)
			fz.SetField(fieldText)
			fz.SetFuzziness(n)
			alts = append(alts, fz)
		}
		words = append(words, bleve.NewDisjunctionQuery(alts...))
	}
	switch len(words) {
	case 0:
		return nil, nil
	case 1:
		return words[0], nil
	}
	return bleve.NewConjunctionQuery(words...), nil
}

// fuzziness is how many edits a word may be off: none under three letters
// (too many words are that close), one up to five, two beyond.
func fuzziness(w string) int {
	switch n := utf8.RuneCountInString(w); {
	case n < 3:
		return 0
	case n <= 5:
		return 1
	default:
		return 2
	}
}

// distanceKm is the great-circle distance (haversine, mean Earth radius).
func distanceKm(a, b Point) float64 {
	const r = 6371.0088
	rad := math.Pi / 180
	dLat, dLon := (b.Lat-a.Lat)*rad, (b.Lon-a.Lon)*rad
	h := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(a.Lat*rad)*math.Cos(b.Lat*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * r * math.Asin(math.Min(1, math.Sqrt(h)))
}
