package searchindex

import (
	"fmt"

	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/search"
	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/char/asciifolding"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
)

// textAnalyzer folds accents to ASCII before splitting words and lowers
// their case, so "Múnich", "MUNICH" and "munich" index and query alike.
const textAnalyzer = "berth_text"

// Fields of a hotel document.
const (
	fieldName      = "name"
	fieldCity      = "city"
	fieldCityKey   = "city_key"   // search.FoldCity(city): the exact city filter
	fieldCityAlias = "city_alias" // the city's other names (aliases.go), for free text
	fieldText      = "text"       // name, city and the city's other names: near misses of free text
	fieldCountry   = "country"    // ISO code, upper case
	fieldAmenities = "amenities"  // codes, lower case
	fieldLocation  = "location"   // geo point
	fieldMinPrice  = "min_price"  // lowest room price: orders candidates for sort=price
)

func newMapping() (mapping.IndexMapping, error) {
	im := bleve.NewIndexMapping()
	if err := im.AddCustomAnalyzer(textAnalyzer, map[string]any{
		"type":          custom.Name,
		"char_filters":  []any{asciifolding.Name},
		"tokenizer":     unicode.Name,
		"token_filters": []any{lowercase.Name},
	}); err != nil {
		return nil, fmt.Errorf("search mapping: %w", err)
	}
	text := bleve.NewTextFieldMapping()
	text.Analyzer, text.Store, text.IncludeInAll, text.IncludeTermVectors, text.DocValues = textAnalyzer, false, false, false, false
	keyword := bleve.NewKeywordFieldMapping()
	keyword.Store, keyword.IncludeInAll, keyword.IncludeTermVectors, keyword.DocValues = false, false, false, false
	geo := bleve.NewGeoPointFieldMapping()
	geo.Store, geo.IncludeInAll = false, false
	num := bleve.NewNumericFieldMapping()
	num.Store, num.IncludeInAll = false, false
	doc := bleve.NewDocumentStaticMapping()
	doc.AddFieldMappingsAt(fieldName, text)
	doc.AddFieldMappingsAt(fieldCity, text)
	doc.AddFieldMappingsAt(fieldCityAlias, text)
	doc.AddFieldMappingsAt(fieldText, text)
	doc.AddFieldMappingsAt(fieldCityKey, keyword)
	doc.AddFieldMappingsAt(fieldCountry, keyword)
	doc.AddFieldMappingsAt(fieldAmenities, keyword)
	doc.AddFieldMappingsAt(fieldLocation, geo)
	doc.AddFieldMappingsAt(fieldMinPrice, num)
	im.DefaultMapping = doc
	im.DefaultAnalyzer = textAnalyzer
	im.StoreDynamic, im.IndexDynamic, im.DocValuesDynamic = false, false, false
	return im, nil
}

// openIndex opens an in-memory scorch index (see docs/adr/0009-search-index.md: the index
// is rebuilt from a snapshot at start, so nothing is kept on disk).
func openIndex(m mapping.IndexMapping) (bleve.Index, error) {
	idx, err := bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("open search index: %w", err)
	}
	return idx, nil
}

// document is what bleve indexes of a hotel; the rest of the hotel (room
// types, prices) stays in the catalog and filters the candidates.
func document(h *reservation.Hotel) map[string]any {
	d := map[string]any{
		fieldName:      h.Name,
		fieldCity:      h.City,
		fieldCityKey:   search.FoldCity(h.City),
		fieldCountry:   h.Country,
		fieldAmenities: h.Amenities,
	}
	all := []string{h.Name, h.City}
	if names := aliasesOf(h.City); names != nil {
		d[fieldCityAlias] = names
		all = append(all, names...)
	}
	d[fieldText] = all
	if h.Latitude != nil && h.Longitude != nil {
		d[fieldLocation] = map[string]any{"lat": *h.Latitude, "lon": *h.Longitude}
	}
	if len(h.RoomTypes) > 0 {
		p := h.RoomTypes[0].PriceCents
		for _, rt := range h.RoomTypes {
			p = min(p, rt.PriceCents)
		}
		d[fieldMinPrice] = float64(p)
	}
	return d
}
