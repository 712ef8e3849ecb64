// Package search is hotel search as the rest of Berth sees it: the question
// a guest asks, the page that answers it, and how a city name folds so that
// "  Múnich " finds "munich". The store answers the question (postgres); the
// HTTP edge and the cache only pass these values along, so neither needs the
// database driver to speak of a search.
package search

import (
	"strings"
	"unicode"

	"github.com/berthhq/berth/internal/reservation"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Query asks for the hotels of a city with a room type that can take Guests
// for every night of Stay at no more than MaxPriceCents.
type Query struct {
	City          string // as the guest typed it; folded with FoldCity
	Stay          reservation.Stay
	Guests        int    // at least 1
	MaxPriceCents *int64 // nil: no limit
	// After is the keyset cursor: only hotels with a greater id ("" for the
	// first page). Pages are ordered by hotel_id, so a hotel is never listed
	// twice across pages and no hotel that qualifies throughout is skipped,
	// whatever happens to inventory between pages.
	After string
	Limit int
}

// Hotel is one hotel of a search page with its qualifying room types.
type Hotel struct {
	ID        string     `json:"hotel_id"`
	Name      string     `json:"name"`
	City      string     `json:"city"`
	RoomTypes []RoomType `json:"room_types"`
}

// RoomType is a room type that qualifies; Available is the minimum over the
// nights of the stay (at least 1).
type RoomType struct {
	RoomTypeID string `json:"room_type_id"`
	Name       string `json:"name"`
	Available  int    `json:"available"`
	PriceCents int64  `json:"price_cents"`
	Currency   string `json:"currency"`
}

// Page is a page of hotels; More says there may be a next page, after the
// last hotel's id.
type Page struct {
	Hotels []Hotel
	More   bool
}

// FoldCity folds a city name for search: lower case, accents removed,
// spaces collapsed — "  Múnich " and "munich" fold alike. The folded form is
// stored beside the name (city_key) and indexed, so search is an index
// lookup on every engine.
func FoldCity(city string) string {
	t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	folded, _, err := transform.String(t, city)
	if err != nil {
		folded = city
	}
	return strings.Join(strings.Fields(strings.ToLower(folded)), " ")
}
