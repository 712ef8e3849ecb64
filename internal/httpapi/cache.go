package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/search"
)

// Cache is the regional read cache as the public reads see it
// (rediscache.Cache implements it). Entries belong to a partition — kind
// ("hotel", "clinic", "city") and id — and are all dropped by Invalidate.
type Cache interface {
	// Fetch returns the cached bytes under name in the partition, or runs
	// load and caches its result for ttl (0: the cache's default). hit says
	// whether the bytes came from the cache. A cache outage is never an
	// error; load's errors are returned as they are.
	Fetch(ctx context.Context, kind, partitionID, name string, ttl time.Duration,
		load func(context.Context) ([]byte, error)) (body []byte, hit bool, err error)
	Invalidate(ctx context.Context, kind, partitionID string) error
}

// cachedRead answers a public GET with load's value as JSON, through the
// cache when one is configured, and sets X-Cache: hit|miss. Wrapping a read
// is one call, e.g. for a clinic's slot list:
//
//	return s.cachedRead(w, r, "clinic", clinicID, "slots:"+doctorID+":"+day.String(), 0,
//		func(ctx context.Context) (any, error) { return s.cfg.Clinics.ListSlots(ctx, clinicID, doctorID, day) })
func (s *Server) cachedRead(w http.ResponseWriter, r *http.Request, kind, partitionID, name string, ttl time.Duration,
	load func(context.Context) (any, error)) error {
	body, hit, err := fetchJSON(r.Context(), s.cfg.Cache, kind, partitionID, name, ttl, load)
	if err != nil {
		return err
	}
	if hit {
		w.Header().Set("X-Cache", "hit")
	} else {
		w.Header().Set("X-Cache", "miss")
	}
	writeRaw(w, http.StatusOK, body)
	return nil
}

// fetchJSON is cachedRead without the HTTP: c may be nil (no cache).
func fetchJSON(ctx context.Context, c Cache, kind, partitionID, name string, ttl time.Duration,
	load func(context.Context) (any, error)) ([]byte, bool, error) {
	encode := func(ctx context.Context) ([]byte, error) {
		v, err := load(ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	}
	if c == nil {
		b, err := encode(ctx)
		return b, false, err
	}
	return c.Fetch(ctx, kind, partitionID, name, ttl, encode)
}

// availabilityName is the cache name of an availability read of a hotel.
func availabilityName(stay reservation.Stay, roomTypeID string) string {
	return "avail:" + stay.CheckIn.String() + ":" + stay.CheckOut.String() + ":" + roomTypeID
}

// loadAvailability reads a hotel's availability from the store (a miss).
func loadAvailability(hotels HotelStore, hotelID string, stay reservation.Stay, roomTypeID string) func(context.Context) (any, error) {
	return func(ctx context.Context) (any, error) { return hotels.Availability(ctx, hotelID, stay, roomTypeID) }
}

// WarmAvailability loads the availability of a hotel over a stay into the
// cache under the very key and encoding the availability route reads
// (`booking cache warm`). It reports whether the entry was there already.
func WarmAvailability(ctx context.Context, c Cache, hotels HotelStore, hotelID string, stay reservation.Stay) (bool, error) {
	_, hit, err := fetchJSON(ctx, c, string(berth.KindHotel), hotelID, availabilityName(stay, ""), 0,
		loadAvailability(hotels, hotelID, stay, ""))
	return hit, err
}

// invalidatingHotels drops a hotel's cached reads right after one of its
// writes committed in this region: the fast path. The event consumer does
// the same for every region, and the TTL bounds staleness when both are
// lost, so correctness never depends on this path.
type invalidatingHotels struct {
	HotelStore
	cache Cache
	s     *Server
}

func (h invalidatingHotels) invalidate(ctx context.Context, kind, partitionID string) {
	// The write has committed; the client must not lose the answer (nor the
	// invalidation) because it hung up.
	if err := h.cache.Invalidate(context.WithoutCancel(ctx), kind, partitionID); err != nil {
		h.s.log.DebugContext(ctx, "cache invalidation after write failed; TTL bounds staleness", "err", err)
	}
}

func (h invalidatingHotels) after(ctx context.Context, hotelID string, resp berth.Response, err error) (berth.Response, error) {
	if err == nil && resp.Status < 300 {
		h.invalidate(ctx, string(berth.KindHotel), hotelID)
	}
	return resp, err
}

func (h invalidatingHotels) CreateHotel(ctx context.Context, v reservation.Hotel) (reservation.Hotel, error) {
	v, err := h.HotelStore.CreateHotel(ctx, v)
	if err == nil {
		h.invalidate(ctx, "city", search.FoldCity(v.City))
	}
	return v, err
}

func (h invalidatingHotels) UpdateHotel(ctx context.Context, hotelID string, p reservation.HotelPatch) (reservation.Hotel, error) {
	v, err := h.HotelStore.UpdateHotel(ctx, hotelID, p)
	if err == nil {
		h.invalidate(ctx, string(berth.KindHotel), hotelID)
		h.invalidate(ctx, "city", search.FoldCity(v.City))
	}
	return v, err
}

func (h invalidatingHotels) CreateRoomType(ctx context.Context, rt reservation.RoomType) (reservation.RoomType, error) {
	rt, err := h.HotelStore.CreateRoomType(ctx, rt)
	if err == nil {
		h.invalidate(ctx, string(berth.KindHotel), rt.HotelID)
	}
	return rt, err
}

func (h invalidatingHotels) SetInventory(ctx context.Context, hotelID, roomTypeID string, from, to reservation.Date, total int, onlyMissing bool) (int, error) {
	n, err := h.HotelStore.SetInventory(ctx, hotelID, roomTypeID, from, to, total, onlyMissing)
	if err == nil {
		h.invalidate(ctx, string(berth.KindHotel), hotelID)
	}
	return n, err
}

func (h invalidatingHotels) Hold(ctx context.Context, req reservation.HoldRequest, idem *berth.Idem) (berth.Response, error) {
	resp, err := h.HotelStore.Hold(ctx, req, idem)
	return h.after(ctx, req.HotelID, resp, err)
}

func (h invalidatingHotels) Confirm(ctx context.Context, hotelID, reservationID string, pay payments.Payment, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error) {
	resp, err := h.HotelStore.Confirm(ctx, hotelID, reservationID, pay, authorize, idem)
	return h.after(ctx, hotelID, resp, err)
}

func (h invalidatingHotels) Cancel(ctx context.Context, hotelID, reservationID string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error) {
	resp, err := h.HotelStore.Cancel(ctx, hotelID, reservationID, authorize, idem)
	return h.after(ctx, hotelID, resp, err)
}

// SearchHotels passes search through to the wrapped store.
func (h invalidatingHotels) SearchHotels(ctx context.Context, q search.Query) (search.Page, error) {
	if hs, ok := h.HotelStore.(HotelSearcher); ok {
		return hs.SearchHotels(ctx, q)
	}
	return search.Page{}, berth.Errorf(berth.CodeNotFound, "hotel search is not available")
}

// withCache wires the cache into a config: writes through the hotel store
// invalidate the hotel's cached reads.
func withCache(s *Server) {
	if s.cfg.Cache != nil && s.cfg.Hotels != nil {
		s.cfg.Hotels = invalidatingHotels{HotelStore: s.cfg.Hotels, cache: s.cfg.Cache, s: s}
	}
}
