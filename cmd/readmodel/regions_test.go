package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// A guest with stays in hotels homed in three regions sees every one of
// them, with its current status, through the partner API: three booking
// services on one database, a relay per region, one NATS, the read model.
func TestGuestSeesBookingsOfThreeRegions(t *testing.T) {
	s := newStack(t)
	for _, r := range berth.Regions() {
		s.startRelay(r, nil)
	}
	s.startReadModel(nil)
	guest := "guest-" + strings.Repeat("x", 4) + time.Now().Format("150405.000000")
	key := s.partnerKey(guest)

	want := map[string]string{} // reservation id → status
	var bookings []booking
	for i, r := range berth.Regions() {
		env := s.regions[r]
		h := env.SeedHotel(r, 5, 0, bookingTestFrom, bookingTestTo)
		for j := range 2 {
			b := hold(t, env, h, guest, 10+i*3+j)
			bookings = append(bookings, b)
			want[b.id] = "held"
		}
	}
	// Change each region's bookings: confirm one, cancel the other.
	for i := 0; i < len(bookings); i += 2 {
		act(t, s.regions[bookings[i].region], bookings[i], "confirm")
		want[bookings[i].id] = "confirmed"
		act(t, s.regions[bookings[i+1].region], bookings[i+1], "cancel")
		want[bookings[i+1].id] = "cancelled"
	}
	// Another guest's booking must not show up.
	other := hold(t, s.regions["eu-west"], s.regions["eu-west"].SeedHotel("eu-west", 5, 0, bookingTestFrom, bookingTestTo), "someone-else", 20)

	path := "/v1/guests/" + guest + "/reservations"
	eventually(t, 20*time.Second, "all six bookings with current statuses", func() bool {
		p := s.list(path, key)
		if len(p.Items) != len(want) {
			return false
		}
		for _, it := range p.Items {
			if want[it.ID] != it.Status {
				return false
			}
		}
		return true
	})
	p := s.list(path, key)
	regionsSeen := map[string]bool{}
	for _, it := range p.Items {
		if it.ID == other.id {
			t.Fatalf("another guest's booking leaked: %+v", it)
		}
		if it.Kind != "hotel" || it.Start == "" || it.End == "" || it.Title == "" || it.UpdatedAt == "" {
			t.Errorf("incomplete item %+v", it)
		}
		for _, b := range bookings {
			if b.id == it.ID {
				regionsSeen[b.region] = true
			}
		}
	}
	if len(regionsSeen) != 3 {
		t.Fatalf("items from regions %v, want all three", regionsSeen)
	}

	t.Run("filters and cursor pages", func(t *testing.T) {
		if got := s.list(path+"?status=confirmed", key); len(got.Items) != 3 {
			t.Fatalf("confirmed: %d items, want 3", len(got.Items))
		}
		if got := s.list(path+"?kind=clinic", key); len(got.Items) != 0 {
			t.Fatalf("clinic: %d items, want 0", len(got.Items))
		}
		seen := map[string]bool{}
		next := ""
		for range 10 {
			q := path + "?limit=4"
			if next != "" {
				q += "&cursor=" + next
			}
			pg := s.list(q, key)
			for _, it := range pg.Items {
				if seen[it.ID] {
					t.Fatalf("item %s on two pages", it.ID)
				}
				seen[it.ID] = true
			}
			if pg.NextCursor == nil {
				break
			}
			next = *pg.NextCursor
		}
		if len(seen) != len(want) {
			t.Fatalf("paged through %d items, want %d", len(seen), len(want))
		}
		// A tampered cursor, or one of another filter, is a 400.
		first := s.list(path+"?limit=2", key)
		c := *first.NextCursor
		tampered := []byte(c)
		tampered[3] ^= 1
		for _, bad := range []string{string(tampered), c + "x", "not-a-cursor"} {
			if st, _, body := s.get(path+"?limit=2&cursor="+bad, map[string]string{"X-API-Key": key}); st != http.StatusBadRequest || !bytes.Contains(body, []byte(`"invalid_request"`)) {
				t.Errorf("tampered cursor: %d %s", st, body)
			}
		}
		if st, _, _ := s.get(path+"?limit=2&status=held&cursor="+c, map[string]string{"X-API-Key": key}); st != http.StatusBadRequest {
			t.Errorf("cursor of another filter: %d", st)
		}
		if st, _, _ := s.get(path+"?limit=0", map[string]string{"X-API-Key": key}); st != http.StatusBadRequest {
			t.Errorf("limit=0: %d", st)
		}
	})

	t.Run("auth", func(t *testing.T) {
		env := s.regions["us-east"]
		st, hdr, _ := s.get(path, map[string]string{"Authorization": "Bearer " + env.Token(guest, berth.RoleGuest)})
		if st != http.StatusOK || hdr.Get("X-Read-Model-Lag-Ms") == "" {
			t.Errorf("own token: %d lag=%q", st, hdr.Get("X-Read-Model-Lag-Ms"))
		}
		if st, _, _ := s.get(path, map[string]string{"Authorization": "Bearer " + env.Token("someone-else", berth.RoleGuest)}); st != http.StatusForbidden {
			t.Errorf("another guest's token: %d, want 403", st)
		}
		if st, _, _ := s.get(path, nil); st != http.StatusUnauthorized {
			t.Errorf("no credentials: %d, want 401", st)
		}
		if st, _, _ := s.get(path, map[string]string{"X-API-Key": "bpk_nope"}); st != http.StatusUnauthorized {
			t.Errorf("unknown key: %d, want 401", st)
		}
		store := postgres.NewReadModel(s.db)
		p, k2, err := store.CreatePartner(context.Background(), "short-lived")
		if err != nil {
			t.Fatal(err)
		}
		if st, _, _ := s.get(path, map[string]string{"X-API-Key": k2}); st != http.StatusNotFound {
			t.Errorf("new key the guest did not grant: %d, want 404", st)
		}
		if st, body := s.send(http.MethodPut, "/v1/guests/"+guest+"/partners/"+p.ID, s.guestAuth(guest)); st != http.StatusOK {
			t.Fatalf("grant: %d %s", st, body)
		}
		if st, _, _ := s.get(path, map[string]string{"X-API-Key": k2}); st != http.StatusOK {
			t.Errorf("new key, granted: %d", st)
		}
		if _, err := store.RevokePartner(context.Background(), p.ID); err != nil {
			t.Fatal(err)
		}
		if st, _, _ := s.get(path, map[string]string{"X-API-Key": k2}); st != http.StatusUnauthorized {
			t.Errorf("revoked key: %d, want 401", st)
		}
	})

	t.Run("verify and rebuild", func(t *testing.T) {
		t.Setenv("BERTH_DATABASE_URL", s.dbURL)
		var out bytes.Buffer
		if err := verify(context.Background(), &out); err != nil {
			t.Fatalf("verify: %v\n%s", err, out.String())
		}
		// Break the view, see verify notice, rebuild, see it agree again.
		if _, err := dbtest.SQL(s.db).Exec(context.Background(), `UPDATE rm_reservations SET status = 'held', version = 1 WHERE id = $1`, bookings[0].id); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		if err := verify(context.Background(), &out); err == nil || !strings.Contains(out.String(), bookings[0].id) {
			t.Fatalf("verify missed a broken row: %v\n%s", err, out.String())
		}
		if _, err := postgres.NewReadModel(s.db).Rebuild(context.Background()); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		if err := verify(context.Background(), &out); err != nil {
			t.Fatalf("verify after rebuild: %v\n%s", err, out.String())
		}
	})
}

var (
	bookingTestFrom = time.Now().UTC().Format(time.DateOnly)
	bookingTestTo   = time.Now().UTC().AddDate(0, 0, 60).Format(time.DateOnly)
)
