package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/search"
	"github.com/google/uuid"
)

// HotelSearcher is what hotel search needs from the store; the hotel store
// serves it when it implements it.
type HotelSearcher interface {
	SearchHotels(ctx context.Context, q search.Query) (search.Page, error)
}

const (
	searchDefaultLimit = 20
	searchMaxLimit     = 100
	// searchTTL bounds how stale a cached search page may be. Search pages
	// span many hotels and a hotel's events name the hotel, not its city,
	// so pages are dropped by their TTL (and by a new hotel in the city), not
	// by every hold; the hotel's availability page — the step before a hold —
	// is invalidated exactly, and the hold itself decides in the database.
	searchTTL = 5 * time.Second
)

type searchResponse struct {
	Hotels     []search.Hotel `json:"hotels"`
	NextCursor *string        `json:"next_cursor"`
}

// searchHotels serves GET /v1/hotels?city=&check_in=&check_out=[&guests=]
// [&max_price_cents=][&limit=][&cursor=] (API.md): hotels of the city (case
// and accents ignored) with a room type for the guests, within the price,
// available every night; keyset pages by hotel id.
func (s *Server) searchHotels(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Search != nil {
		return s.searchIndex(w, r)
	}
	searcher, ok := s.cfg.Hotels.(HotelSearcher)
	if !ok {
		return berth.Errorf(berth.CodeNotFound, "hotel search is not available")
	}
	q := r.URL.Query()
	var f Fields
	for k, v := range q {
		switch k {
		case "city", "check_in", "check_out", "guests", "max_price_cents", "limit", "cursor":
			if len(v) > 1 {
				f.Add(k, "given more than once")
			}
		case "q", "near", "radius_km", "sort", "amenities":
			f.Add(k, "needs the search index, which this service does not run")
		default:
			f.Add(k, "unknown query parameter")
		}
	}
	sq := search.Query{
		City:   text(&f, "city", q.Get("city"), 100),
		Stay:   s.parseStay(&f, q.Get("check_in"), q.Get("check_out")),
		Guests: 1,
		Limit:  searchDefaultLimit,
	}
	if v := q.Get("guests"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 50 {
			f.Add("guests", "want 1 to 50")
		}
		sq.Guests = n
	}
	if v := q.Get("max_price_cents"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			f.Add("max_price_cents", "want a non-negative integer")
		}
		sq.MaxPriceCents = &n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > searchMaxLimit {
			f.Add("limit", "want 1 to 100")
		}
		sq.Limit = n
	}
	if err := f.Err(); err != nil {
		return err
	}
	city := search.FoldCity(sq.City)
	fp := searchFingerprint(city, q)
	if c := q.Get("cursor"); c != "" {
		after, ok := decodeCursor(c, fp)
		if !ok {
			return berth.Invalid(berth.FieldError{Field: "cursor", Message: "not a cursor of this search"})
		}
		sq.After = after
	}
	name := "search:" + fp + ":" + strconv.Itoa(sq.Limit) + ":" + sq.After
	return s.cachedRead(w, r, "city", city, name, searchTTL, func(ctx context.Context) (any, error) {
		page, err := searcher.SearchHotels(ctx, sq)
		if err != nil {
			return nil, err
		}
		resp := searchResponse{Hotels: page.Hotels}
		if page.More && len(page.Hotels) > 0 {
			c, err := encodeCursor(page.Hotels[len(page.Hotels)-1].ID, fp)
			if err != nil {
				return nil, err
			}
			resp.NextCursor = &c
		}
		return resp, nil
	})
}

// searchFingerprint names the search a cursor belongs to: the folded city
// and the filters, not the page size.
func searchFingerprint(city string, q map[string][]string) string {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return city + "|" + get("check_in") + "|" + get("check_out") + "|" + get("guests") + "|" + get("max_price_cents")
}

// A cursor is the last hotel id of the page plus a checksum binding it to
// the search: base64url(uuid[16] ‖ sha256(fingerprint ‖ uuid)[:8]). It is
// opaque to clients; an edited cursor, or one from another search, fails the
// checksum and is a 400. It is not a secret: forging one only skips ahead in
// a public listing.
//
// The id comes from the database; one that is not a UUID is an error of
// ours (a 500), never a panic in the request path.
func encodeCursor(hotelID, fp string) (string, error) {
	id, err := uuid.Parse(hotelID)
	if err != nil {
		return "", fmt.Errorf("search cursor: hotel id %q: %w", hotelID, err)
	}
	b := append(id[:], cursorSum(id, fp)...)
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeCursor(c, fp string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) != 24 {
		return "", false
	}
	id, err := uuid.FromBytes(b[:16])
	if err != nil || !bytes.Equal(b[16:], cursorSum(id, fp)) {
		return "", false
	}
	return strings.ToLower(id.String()), true
}

func cursorSum(id uuid.UUID, fp string) []byte {
	h := sha256.New()
	h.Write([]byte("berth-search-v1\x00" + fp + "\x00"))
	h.Write(id[:])
	return h.Sum(nil)[:8]
}
