package httpapi_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/rediscache"
)

// createHotel creates a hotel in city via the API and returns its id.
func createHotel(t testing.TB, env *bookingtest.Env, name, city string) string {
	t.Helper()
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels", Token: env.Admin(), Body: map[string]any{
		"name": name, "city": city, "country": "DE", "timezone": "Europe/Berlin", "home_region": "us-east"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create hotel: %d %s", r.Status, r.Body)
	}
	return r.JSON()["hotel_id"].(string)
}

// addRoomType adds a room type with rooms over [from, to) and returns its id.
func addRoomType(t testing.TB, env *bookingtest.Env, hotelID, name string, maxGuests int, price int64, rooms int, from, to string) string {
	t.Helper()
	admin := env.Admin()
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + hotelID + "/room-types", Token: admin, Body: map[string]any{
		"name": name, "max_guests": maxGuests, "price_cents": price, "currency": "EUR", "overbooking_pct": 0}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create room type: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["room_type_id"].(string)
	r = env.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + hotelID + "/room-types/" + id + "/inventory", Token: admin,
		Body: map[string]any{"from": from, "to": to, "total_rooms": rooms}})
	if r.Status != http.StatusOK {
		t.Fatalf("set inventory: %d %s", r.Status, r.Body)
	}
	return id
}

type searchResult struct {
	status int
	xcache string
	code   string
	hotels map[string][]string // hotel id → room type ids, in order
	order  []string
	cursor string
}

func search(t testing.TB, env *bookingtest.Env, query url.Values) searchResult {
	t.Helper()
	r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels?" + query.Encode()})
	res := searchResult{status: r.Status, xcache: r.Header.Get("X-Cache"), code: r.Code(), hotels: map[string][]string{}}
	if r.Status != http.StatusOK {
		return res
	}
	body := r.JSON()
	for _, h := range body["hotels"].([]any) {
		hm := h.(map[string]any)
		id := hm["hotel_id"].(string)
		res.order = append(res.order, id)
		for _, rt := range hm["room_types"].([]any) {
			res.hotels[id] = append(res.hotels[id], rt.(map[string]any)["room_type_id"].(string))
		}
	}
	if c, ok := body["next_cursor"].(string); ok {
		res.cursor = c
	}
	return res
}

func TestSearchFoldsCityAndFilters(t *testing.T) {
	t.Parallel()
	env, _, _ := startCached(t, rediscache.Options{}, bookingtest.Options{})
	from, to := bookingtest.Date(1), bookingtest.Date(30)
	in, out := bookingtest.Date(5), bookingtest.Date(8)

	a := createHotel(t, env, "A", "Múnich")
	aDouble := addRoomType(t, env, a, "Double", 2, 10_000, 5, from, to)
	aFamily := addRoomType(t, env, a, "Family", 4, 25_000, 1, from, to)
	b := createHotel(t, env, "B", "  MUNICH ")
	bSingle := addRoomType(t, env, b, "Single", 1, 5_000, 3, from, to)
	c := createHotel(t, env, "C", "München") // another spelling is another city
	addRoomType(t, env, c, "Double", 2, 9_000, 5, from, to)
	d := createHotel(t, env, "D", "munich") // sold out: no rooms at all
	addRoomType(t, env, d, "Double", 2, 9_000, 0, from, to)
	e := createHotel(t, env, "E", "Munich") // inventory ends in the middle of the stay
	addRoomType(t, env, e, "Double", 2, 9_000, 5, from, bookingtest.Date(6))

	q := func(kv ...string) url.Values {
		v := url.Values{"city": {"munich"}, "check_in": {in}, "check_out": {out}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	r := search(t, env, q())
	if r.status != http.StatusOK || r.xcache != "miss" {
		t.Fatalf("search: %d X-Cache=%s", r.status, r.xcache)
	}
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(r.order, want) {
		t.Fatalf("munich found %v, want %v (A Múnich, B MUNICH; not C München, sold-out D, part-stay E)", r.order, want)
	}
	if !slices.Equal(r.hotels[a], []string{aDouble, aFamily}) || !slices.Equal(r.hotels[b], []string{bSingle}) {
		t.Fatalf("room types: %v", r.hotels)
	}
	if r.cursor != "" {
		t.Fatalf("one page but next_cursor %q", r.cursor)
	}
	if again := search(t, env, q()); again.xcache != "hit" || !slices.Equal(again.order, want) {
		t.Fatalf("second search: X-Cache=%s %v", again.xcache, again.order)
	}
	if r := search(t, env, q("city", "MÚNICH")); !slices.Equal(r.order, want) {
		t.Fatalf("MÚNICH found %v", r.order)
	}
	// Guests: only A's Family room takes 3.
	if r := search(t, env, q("guests", "3")); !slices.Equal(r.order, []string{a}) || !slices.Equal(r.hotels[a], []string{aFamily}) {
		t.Fatalf("guests=3: %v", r.hotels)
	}
	// Price: only B's Single is at most 90.00.
	if r := search(t, env, q("max_price_cents", "9000")); !slices.Equal(r.order, []string{b}) {
		t.Fatalf("max_price_cents=9000: %v", r.hotels)
	}
	// Inclusive bound.
	if r := search(t, env, q("max_price_cents", "10000", "guests", "2")); !slices.Equal(r.order, []string{a}) || !slices.Equal(r.hotels[a], []string{aDouble}) {
		t.Fatalf("max 10000, 2 guests: %v", r.hotels)
	}
	if r := search(t, env, q("guests", "3", "max_price_cents", "20000")); r.status != http.StatusOK || len(r.order) != 0 {
		t.Fatalf("nothing qualifies: %d %v", r.status, r.order)
	}
	if r := search(t, env, q("city", "Berlin")); r.status != http.StatusOK || len(r.order) != 0 {
		t.Fatalf("unknown city: %d %v", r.status, r.order)
	}
	// Selling out A's only Family room drops A from a 3-guest search once
	// the page's TTL has passed or the page is re-read uncached; the
	// availability page of A reflects it at once.
	hold(t, env, bookingtest.Hotel{ID: a, RoomTypeID: aFamily}, in, out)
	av := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + a + "/availability?check_in=" + in + "&check_out=" + out + "&room_type_id=" + aFamily})
	if rts := av.JSON()["room_types"].([]any); rts[0].(map[string]any)["available"].(float64) != 0 {
		t.Fatalf("availability after selling out Family: %s", av.Body)
	}
}

func TestSearchRejectsBadInput(t *testing.T) {
	t.Parallel()
	env, _, _ := startCached(t, rediscache.Options{}, bookingtest.Options{})
	from, to := bookingtest.Date(1), bookingtest.Date(30)
	for i := range 3 {
		h := createHotel(t, env, "H", "Múnich")
		addRoomType(t, env, h, "Double", 2, 10_000+int64(i), 5, from, to)
	}
	base := url.Values{"city": {"munich"}, "check_in": {bookingtest.Date(5)}, "check_out": {bookingtest.Date(6)}, "limit": {"1"}}
	first := search(t, env, base)
	if first.status != http.StatusOK || len(first.order) != 1 || first.cursor == "" {
		t.Fatalf("first page: %+v", first)
	}
	next := url.Values{}
	for k, v := range base {
		next[k] = v
	}
	next.Set("cursor", first.cursor)
	if r := search(t, env, next); r.status != http.StatusOK || len(r.order) != 1 || r.order[0] <= first.order[0] {
		t.Fatalf("second page: %+v", r)
	}
	tampered := []byte(first.cursor)
	tampered[3] ^= 1
	bad := map[string]url.Values{}
	add := func(name string, kv ...string) {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		bad[name] = v
	}
	add("tampered cursor", "cursor", string(tampered))
	add("garbage cursor", "cursor", "not-a-cursor")
	add("cursor of another search", "cursor", first.cursor, "guests", "2")
	add("missing city", "city", "")
	add("bad dates", "check_out", bookingtest.Date(4))
	add("guests 0", "guests", "0")
	add("negative price", "max_price_cents", "-1")
	add("limit too big", "limit", "1000")
	add("unknown parameter", "sort", "price")
	for name, q := range bad {
		if r := search(t, env, q); r.status != http.StatusBadRequest || r.code != "invalid_request" {
			t.Errorf("%s: %d %s", name, r.status, r.code)
		}
	}
}

// Paging is keyset by hotel id: across pages no hotel appears twice and no
// hotel that qualifies throughout is skipped, while holds change inventory
// and other hotels sell out and come back between pages.
func TestSearchPagesStablyWhileInventoryChanges(t *testing.T) {
	t.Parallel()
	// No cache: every page reads live inventory, so the churn is visible.
	env := bookingtest.Start(t, bookingtest.Options{})
	from, to := bookingtest.Date(1), bookingtest.Date(30)
	in, out := bookingtest.Date(5), bookingtest.Date(7)
	var stable []bookingtest.Hotel
	var flaky []bookingtest.Hotel
	for i := range 24 {
		id := createHotel(t, env, "H", "Múnich")
		if i%3 == 0 { // one room: sold out and back again during the paging
			flaky = append(flaky, bookingtest.Hotel{ID: id, RoomTypeID: addRoomType(t, env, id, "Double", 2, 10_000, 1, from, to)})
		} else {
			stable = append(stable, bookingtest.Hotel{ID: id, RoomTypeID: addRoomType(t, env, id, "Double", 2, 10_000, 1_000, from, to)})
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { // the churn: holds and cancels on every hotel, bounded
		admin := env.Admin()
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 2_000 && ctx.Err() == nil; i++ {
			h := stable[r.IntN(len(stable))]
			if i%2 == 0 {
				h = flaky[r.IntN(len(flaky))]
			}
			resp, err := env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin,
				IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "churn", "room_type_id": h.RoomTypeID,
					"check_in": in, "check_out": out, "quantity": 1}})
			if err != nil || resp.Status != http.StatusCreated {
				continue // sold out (the flaky ones) or shutting down
			}
			if i%2 == 0 { // give the flaky room back, so it flips
				id := resp.JSON()["reservation_id"].(string)
				_, _ = env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/cancel",
					Token: admin, IdemKey: bookingtest.NewKey()})
			}
		}
	})
	defer func() { cancel(); wg.Wait() }()

	for round := range 5 {
		q := url.Values{"city": {"munich"}, "check_in": {in}, "check_out": {out}, "limit": {"4"}}
		var got []string
		for page := 0; ; page++ {
			if page > 50 {
				t.Fatal("more than 50 pages of at most 4 out of 24 hotels")
			}
			r := search(t, env, q)
			if r.status != http.StatusOK {
				t.Fatalf("round %d page %d: %d %s", round, page, r.status, r.code)
			}
			got = append(got, r.order...)
			if r.cursor == "" {
				break
			}
			q.Set("cursor", r.cursor)
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("round %d: ids not strictly increasing across pages (duplicate or reorder): %v", round, got)
			}
		}
		for _, h := range stable {
			if !slices.Contains(got, h.ID) {
				t.Fatalf("round %d: hotel %s qualifies throughout but was skipped", round, h.ID)
			}
		}
		t.Logf("round %d: %d hotels listed (%d stable, %d of %d one-room hotels)", round, len(got), len(stable), len(got)-len(stable), len(flaky))
	}
}
