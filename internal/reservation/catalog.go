package reservation

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Event types of the catalog and the inventory, written to the outbox with
// the reservation events.
const (
	// EventCatalog carries the whole hotel with its room types after every
	// change of either (aggregate: the hotel; version: CatalogVersion).
	EventCatalog = "hotel.catalog"
	// EventInventory carries what is left of each night a transaction
	// changed, with each night's version (aggregate: the room type).
	EventInventory = "inventory.changed"
)

// WithInventory is the data of a reservation event whose transaction
// changed nights (held, confirmed after a lapse, cancelled, expired): the
// reservation, plus what is left of each night it took or gave back — so
// the search summary follows bookings without a second outbox row per
// booking.
type WithInventory struct {
	Reservation
	Inventory *InventoryChange `json:"inventory,omitempty"`
}

// InventoryChange is the data of an inventory.changed event (and the
// inventory of a reservation event).
type InventoryChange struct {
	HotelID    string       `json:"hotel_id"`
	RoomTypeID string       `json:"room_type_id"`
	Nights     []NightCount `json:"nights"`
}

// NightCount is what is left of one night of a room type (sellable limit
// minus rooms taken, never below zero) after a change; Version orders the
// changes of that night.
type NightCount struct {
	Night     string `json:"night"` // YYYY-MM-DD
	Available int    `json:"available"`
	Version   int64  `json:"version"`
}

// MaxAmenities bounds the amenities of a hotel.
const MaxAmenities = 32

// NormalizeAmenities lower-cases, de-duplicates and sorts amenity codes;
// a code is 1 to 32 of a-z, 0-9, '_' and '-'.
func NormalizeAmenities(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, a := range in {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == "" || len(a) > 32 || strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) {
			return nil, fmt.Errorf("amenity %q: want 1 to 32 of a-z, 0-9, _ and -", a)
		}
		out = append(out, a)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxAmenities {
		return nil, fmt.Errorf("at most %d amenities", MaxAmenities)
	}
	return out, nil
}

// ErrLocation says a location is incomplete or out of range.
var ErrLocation = errors.New("want latitude -90 to 90 and longitude -180 to 180, both or neither")

// ValidLocation checks an optional location: both coordinates or neither,
// within range.
func ValidLocation(lat, lon *float64) error {
	if (lat == nil) != (lon == nil) {
		return ErrLocation
	}
	if lat != nil && (*lat < -90 || *lat > 90 || *lon < -180 || *lon > 180 || *lat != *lat || *lon != *lon) {
		return ErrLocation
	}
	return nil
}

// HotelPatch is a change of a hotel's descriptive fields; nil leaves a
// field as it is. ClearLocation removes the location.
type HotelPatch struct {
	Name, City, Country *string
	Latitude, Longitude *float64
	ClearLocation       bool
	Amenities           *[]string
	// Chain sets the chain ("" removes it).
	Chain *string
}

// RoomNights is what is left of a room type's nights in a snapshot read, in
// columns rather than one value per night: night i is Offsets[i] days after
// the first night asked for, with Available[i] left (never below zero) and
// Versions[i] its version. A snapshot of millions of nights is read as one
// such value per room type, without a date text or an allocation per night.
type RoomNights struct {
	HotelID    string
	RoomTypeID string
	Offsets    []int32
	Available  []int32
	Versions   []int64
}
