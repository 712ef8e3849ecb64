package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/searchindex"
	"github.com/google/uuid"
)

// HotelIndex answers hotel search from the regional search index
// (searchindex.Index implements it).
type HotelIndex interface {
	Search(ctx context.Context, q searchindex.Query) (searchindex.Page, error)
}

var _ HotelIndex = (*searchindex.Index)(nil)

// searchParams are the query parameters GET /v1/hotels takes.
var searchParams = map[string]bool{
	"q": true, "city": true, "check_in": true, "check_out": true, "guests": true, "max_price_cents": true,
	"near": true, "radius_km": true, "sort": true, "amenities": true, "limit": true, "cursor": true,
}

// defaultRadiusKm is the radius of a near= search without radius_km.
const defaultRadiusKm = 25

type indexResponse struct {
	Hotels     []searchindex.Hotel `json:"hotels"`
	NextCursor *string             `json:"next_cursor"`
}

// searchIndex serves GET /v1/hotels from the search index (API.md): free
// text q over name and city, tolerant of case, accents and typos; the
// city, date, guests and price filters; near=lat,lon with radius_km;
// amenities=a,b (all required); sort=relevance|price|distance; keyset
// pages with signed cursors. It never reads the booking database.
func (s *Server) searchIndex(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query()
	var f Fields
	for k, v := range raw {
		switch {
		case !searchParams[k]:
			f.Add(k, "unknown query parameter")
		case len(v) > 1:
			f.Add(k, "given more than once")
		}
	}
	get := raw.Get
	q := searchindex.Query{Limit: searchDefaultLimit, Sort: searchindex.SortRelevance}
	if v := get("q"); v != "" {
		q.Text = text(&f, "q", v, 200)
	}
	if v := get("city"); v != "" {
		q.City = text(&f, "city", v, 100)
	}
	if get("check_in") != "" || get("check_out") != "" {
		stay := s.parseStay(&f, get("check_in"), get("check_out"))
		q.Stay = &stay
	}
	if v := get("guests"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 50 {
			f.Add("guests", "want 1 to 50")
		}
		q.Guests = n
	}
	if v := get("max_price_cents"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			f.Add("max_price_cents", "want a non-negative integer")
		}
		q.MaxPriceCents = &n
	}
	if v := get("near"); v != "" {
		p, ok := parsePoint(v)
		if !ok {
			f.Add("near", "want lat,lon in degrees (latitude -90 to 90, longitude -180 to 180)")
		}
		q.Near, q.RadiusKm = &p, defaultRadiusKm
	}
	if v := get("radius_km"); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		switch {
		case err != nil || math.IsNaN(n) || n <= 0 || n > 20_000:
			f.Add("radius_km", "want a number above 0, at most 20000")
		case q.Near == nil:
			f.Add("radius_km", "needs near")
		}
		q.RadiusKm = n
	}
	if v := get("amenities"); v != "" {
		a, err := reservation.NormalizeAmenities(strings.Split(v, ","))
		if err != nil {
			f.Add("amenities", err.Error())
		}
		q.Amenities = a
	}
	if v := get("sort"); v != "" {
		switch v {
		case searchindex.SortRelevance, searchindex.SortPrice:
		case searchindex.SortDistance:
			if q.Near == nil && get("near") == "" {
				f.Add("sort", "distance needs near")
			}
		default:
			f.Add("sort", "want relevance, price or distance")
		}
		q.Sort = v
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > searchMaxLimit {
			f.Add("limit", "want 1 to 100")
		}
		q.Limit = n
	}
	if err := f.Err(); err != nil {
		return err
	}
	fp := indexFingerprint(raw)
	if c := get("cursor"); c != "" {
		after, ok := decodeIndexCursor(c, fp)
		if !ok {
			return berth.Invalid(berth.FieldError{Field: "cursor", Message: "not a cursor of this search"})
		}
		q.After = &after
	}
	page, err := s.cfg.Search.Search(r.Context(), q)
	if errors.Is(err, searchindex.ErrNotReady) {
		return &berth.Error{Code: berth.CodeUnavailable, Detail: "the search index is being built", RetryAfter: 2, Err: err}
	}
	if err != nil {
		return err
	}
	resp := indexResponse{Hotels: page.Hotels}
	if page.Next != nil {
		c := encodeIndexCursor(*page.Next, fp)
		resp.NextCursor = &c
	}
	WriteJSON(w, http.StatusOK, resp)
	return nil
}

// parsePoint parses "lat,lon".
func parsePoint(v string) (searchindex.Point, bool) {
	a, b, ok := strings.Cut(v, ",")
	if !ok {
		return searchindex.Point{}, false
	}
	lat, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
	lon, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
	if err1 != nil || err2 != nil || reservation.ValidLocation(&lat, &lon) != nil {
		return searchindex.Point{}, false
	}
	return searchindex.Point{Lat: lat, Lon: lon}, true
}

// indexFingerprint names the search a cursor belongs to: every parameter
// but the page size and the cursor, in a fixed order.
func indexFingerprint(q map[string][]string) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		if k != "limit" && k != "cursor" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + strings.Join(q[k], ",") + "\x00")
	}
	return b.String()
}

// An index cursor is the sort key and id of the last hotel of a page plus a
// checksum binding them to the search:
// base64url(key float64[8] ‖ uuid[16] ‖ sha256(fingerprint ‖ key ‖ uuid)[:8]).
// Like the database search's cursor it is opaque and not a secret; an
// edited one, or one of another search, is a 400.
func encodeIndexCursor(c searchindex.Cursor, fp string) string {
	id := uuid.MustParse(c.ID)
	b := binary.BigEndian.AppendUint64(nil, math.Float64bits(c.Key))
	b = append(b, id[:]...)
	b = append(b, indexCursorSum(b, fp)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeIndexCursor(s, fp string) (searchindex.Cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 32 || !bytes.Equal(b[24:], indexCursorSum(b[:24], fp)) {
		return searchindex.Cursor{}, false
	}
	id, err := uuid.FromBytes(b[8:24])
	key := math.Float64frombits(binary.BigEndian.Uint64(b[:8]))
	if err != nil || math.IsNaN(key) {
		return searchindex.Cursor{}, false
	}
	return searchindex.Cursor{Key: key, ID: strings.ToLower(id.String())}, true
}

func indexCursorSum(payload []byte, fp string) []byte {
	h := sha256.New()
	h.Write([]byte("berth-search-v2\x00" + fp + "\x00"))
	h.Write(payload)
	return h.Sum(nil)[:8]
}

// SearchAdmin starts and follows the rebuild of the search index of this
// service (each replica holds its own index).
type SearchAdmin interface {
	// Rebuild starts a rebuild in the background; searchindex.ErrBuilding when
	// one runs already.
	Rebuild() error
	Progress() searchindex.Progress
	Stats() searchindex.Stats
}

type rebuildResponse struct {
	Progress searchindex.Progress `json:"progress"`
	Index    searchindex.Stats    `json:"index"`
}

// startSearchRebuild serves POST /v1/search/rebuild (role ops): 202 with
// the progress; 409 invalid_state when a rebuild runs already.
func (s *Server) startSearchRebuild(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.requireRole(r, berth.RoleOps); err != nil {
		return err
	}
	if err := s.cfg.SearchAdmin.Rebuild(); errors.Is(err, searchindex.ErrBuilding) {
		return &berth.Error{Code: berth.CodeInvalidState, Detail: err.Error(),
			Extra: map[string]any{"progress": s.cfg.SearchAdmin.Progress()}}
	} else if err != nil {
		return err
	}
	WriteJSON(w, http.StatusAccepted, rebuildResponse{Progress: s.cfg.SearchAdmin.Progress(), Index: s.cfg.SearchAdmin.Stats()})
	return nil
}

// searchRebuildProgress serves GET /v1/search/rebuild (role ops).
func (s *Server) searchRebuildProgress(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.requireRole(r, berth.RoleOps); err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, rebuildResponse{Progress: s.cfg.SearchAdmin.Progress(), Index: s.cfg.SearchAdmin.Stats()})
	return nil
}
