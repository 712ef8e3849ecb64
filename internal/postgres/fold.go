package postgres

import (
	"strings"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

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
