package searchindex_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
)

// A rebuild answers every search throughout: queries race the whole
// rebuild (snapshot, indexing, swap) and none fails or comes back empty for
// a query that had results; a hotel created during the rebuild is in the
// new generation.
func TestRebuildWithoutDowntime(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	// A catalog large enough that the rebuild takes many searches' time:
	// 1,500 hotels written straight to the database (as a restore would),
	// which only the snapshot brings in.
	for _, stmt := range []string{
		`INSERT INTO placements (kind, partition_id, home_region)
		 SELECT 'hotel', ('00000000-0000-4000-8000-' || lpad(i::TEXT, 12, '0'))::UUID, 'us-east' FROM generate_series(1, 1500) AS i`,
		`INSERT INTO hotels (hotel_id, home_region, name, city, city_key, country, timezone, latitude, longitude, amenities)
		 SELECT ('00000000-0000-4000-8000-' || lpad(i::TEXT, 12, '0'))::UUID, 'us-east',
		        (ARRAY['Grand', 'Central', 'Park', 'Royal', 'Plaza'])[1 + i % 5] || ' Hotel ' || i,
		        (ARRAY['München', 'Berlin', 'Hamburg', 'Köln', 'Wien', 'Zürich'])[1 + i % 6],
		        (ARRAY['munchen', 'berlin', 'hamburg', 'koln', 'wien', 'zurich'])[1 + i % 6], 'DE', 'Europe/Berlin',
		        48 + (i % 100) / 100.0, 11 + (i % 70) / 100.0, ARRAY['wifi']
		 FROM generate_series(1, 1500) AS i`,
		`INSERT INTO room_types (hotel_id, room_type_id, home_region, name, max_guests, price_cents, currency)
		 SELECT hotel_id, gen_random_uuid(), 'us-east', 'Double', 2, 8000 + (random() * 10000)::INT8, 'EUR' FROM hotels`,
		`INSERT INTO room_inventory (hotel_id, room_type_id, night, home_region, total_rooms, sell_limit, version)
		 SELECT hotel_id, room_type_id, CURRENT_DATE + d, 'us-east', 3, 3, 1 FROM room_types, generate_series(0, 13) AS d`,
	} {
		if _, err := dbtest.SQL(s.DB).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	ops := s.Token("ops", berth.RoleOps)
	rebuild := func() {
		t.Helper()
		r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/search/rebuild", Token: ops})
		if r.Status != http.StatusAccepted {
			t.Fatalf("rebuild: %d %s", r.Status, r.Body)
		}
		s.eventuallyWithin("the rebuild", 3*time.Minute, func() bool {
			r := s.Do(bookingtest.Request{Method: "GET", Path: "/v1/search/rebuild", Token: ops})
			st, _ := r.JSON()["progress"].(map[string]any)["state"].(string)
			if st == "failed" {
				t.Fatalf("rebuild failed: %s", r.Body)
			}
			return st == "done"
		})
	}
	rebuild() // brings in the catalog written behind the events' back
	if n := s.idx.Stats().Hotels; n != 1500 {
		t.Fatalf("after the first rebuild the index holds %d hotels, want 1500", n)
	}
	queries := []url.Values{
		q("q", "munchen"), q("q", "grand"), q("city", "köln", "sort", "price"),
		q("near", "48.5,11.3", "radius_km", "30", "sort", "distance"),
		q("q", "plaza", "check_in", bookingtest.Date(2), "check_out", bookingtest.Date(5), "guests", "2"),
		q("amenities", "wifi", "limit", "100"),
	}
	for _, p := range queries {
		if len(s.search(p).Hotels) == 0 {
			t.Fatalf("%s: no results before the rebuild", p.Encode())
		}
	}
	gen := s.idx.Stats().Generation

	// Race queries against a second rebuild.
	var (
		stop          atomic.Bool
		wg            sync.WaitGroup
		total, during atomic.Int64
		mu            sync.Mutex
		failures      []string
	)
	for w := range 4 {
		wg.Go(func() {
			for i := w; !stop.Load(); i++ {
				p := queries[i%len(queries)]
				building := s.idx.Progress().State != "done"
				r, err := s.Try(ctx, bookingtest.Request{Method: "GET", Path: "/v1/hotels?" + p.Encode()})
				total.Add(1)
				var res result
				switch {
				case err != nil:
					err = fmt.Errorf("%s: %w", p.Encode(), err)
				case r.Status != http.StatusOK:
					err = fmt.Errorf("%s: %d %s", p.Encode(), r.Status, r.Body)
				default:
					if jerr := jsonUnmarshal(r.Body, &res); jerr != nil || len(res.Hotels) == 0 {
						err = fmt.Errorf("%s: empty page (%v)", p.Encode(), jerr)
					}
				}
				if building && s.idx.Progress().State != "done" {
					during.Add(1)
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	newID, _ := s.createHotel(hotelSpec{Name: "Rebuild Inn", City: "Linz", Country: "AT"})
	rebuild()
	stop.Store(true)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d searches failed during the rebuild, first: %s", len(failures), total.Load(), failures[0])
	}
	if during.Load() == 0 {
		t.Fatalf("no search ran while the rebuild was in progress (%d in all); the test proved nothing", total.Load())
	}
	if g := s.idx.Stats().Generation; g == gen {
		t.Fatalf("the generation did not change: %s", g)
	}
	s.settle()
	if res := s.search(q("q", "rebuild inn")); len(res.Hotels) != 1 || res.Hotels[0].ID != newID {
		t.Fatalf("the hotel created during the rebuild: %+v", res.Hotels)
	}
	t.Logf("%d searches, %d of them while the rebuild ran; none failed", total.Load(), during.Load())
	// A second rebuild while one runs is refused with 409.
	r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/search/rebuild", Token: ops})
	if r.Status != http.StatusAccepted {
		t.Fatalf("rebuild: %d", r.Status)
	}
	if r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/search/rebuild", Token: ops}); r.Status != http.StatusConflict && r.Status != http.StatusAccepted {
		t.Fatalf("second rebuild: %d %s", r.Status, r.Body)
	}
	s.eventually("the last rebuild", func() bool { return s.idx.Progress().State == "done" })
	if r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/search/rebuild", Token: s.admin}); r.Status != http.StatusForbidden {
		t.Fatalf("rebuild as admin: %d, want 403", r.Status)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestRebuildReadsEachNight: the snapshot reads what is left of every
// night, night by night (the database aggregates a room type's nights into
// arrays; an offset off by one would move a sold-out night), and keeps the
// newest version: a night sold out behind the events' back (as a restore
// would write it, with a newer version) is sold out after a rebuild, and the
// nights on either side are not.
func TestRebuildReadsEachNight(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	id, _ := s.createHotel(hotelSpec{Name: "Nightly Lodge", City: "Graz", Country: "AT",
		Rooms: []roomSpec{{Name: "Single", MaxGuests: 1, Price: 7000, Total: 2}}})
	s.settle()
	stay := func(from, to int) int {
		return len(s.search(q("q", "nightly lodge", "check_in", bookingtest.Date(from), "check_out", bookingtest.Date(to))).Hotels)
	}
	if n := stay(3, 4); n != 1 {
		t.Fatalf("before: night +3 finds %d hotels, want 1", n)
	}
	if _, err := dbtest.SQL(s.DB).Exec(ctx,
		`UPDATE room_inventory SET reserved = sell_limit, version = version + 1 WHERE hotel_id = $1 AND night = CURRENT_DATE + 3`, id); err != nil {
		t.Fatal(err)
	}
	ops := s.Token("ops", berth.RoleOps)
	if r := s.Do(bookingtest.Request{Method: "POST", Path: "/v1/search/rebuild", Token: ops}); r.Status != http.StatusAccepted {
		t.Fatalf("rebuild: %d %s", r.Status, r.Body)
	}
	s.eventuallyWithin("the rebuild", 3*time.Minute, func() bool { return s.idx.Progress().State == "done" })
	for _, c := range []struct{ from, to, want int }{{3, 4, 0}, {2, 5, 0}, {2, 3, 1}, {4, 5, 1}, {0, 3, 1}, {4, 20, 1}} {
		if n := stay(c.from, c.to); n != c.want {
			t.Errorf("nights +%d..+%d: %d hotels, want %d", c.from, c.to, n, c.want)
		}
	}
	if p := s.idx.Progress(); p.Nights < 30 || p.Hotels < 1 || p.Indexed < 1 {
		t.Errorf("progress after the rebuild: %+v", p)
	}
}
