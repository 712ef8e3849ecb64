package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
)

// outboxEvents returns the events of a partition of one type, oldest first.
func outboxEvents[T any](t *testing.T, db *postgres.DB, partition, typ string) []T {
	t.Helper()
	rows, err := dbtest.SQL(db).Query(context.Background(),
		`SELECT payload FROM outbox WHERE partition_id = $1 AND event_type = $2 ORDER BY aggregate_version, created_at, seq`, partition, typ)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var b []byte
		var v T
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// Every catalog change writes the hotel's full state with the next catalog
// version; room types created concurrently serialize on the hotel row, so
// the newest event holds all of them.
func TestCatalogEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	s := postgres.NewStore(db, "us-east", 0)
	lat, lon := 48.1, 11.5
	h, err := s.CreateHotel(ctx, reservation.Hotel{ID: uuid.NewString(), Name: "A", City: "München", Country: "DE",
		Timezone: "Europe/Berlin", HomeRegion: "us-east", Latitude: &lat, Longitude: &lon, Amenities: []string{"wifi"}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := s.CreateRoomType(ctx, reservation.RoomType{ID: uuid.NewString(), HotelID: h.ID, Name: "R",
				MaxGuests: 1 + i, PriceCents: 1000, Currency: "EUR"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	name := "B"
	if _, err := s.UpdateHotel(ctx, h.ID, reservation.HotelPatch{Name: &name, ClearLocation: true}); err != nil {
		t.Fatal(err)
	}
	evs := outboxEvents[reservation.Hotel](t, db, h.ID, reservation.EventCatalog)
	var versions []int64
	for _, e := range evs {
		versions = append(versions, e.CatalogVersion)
	}
	if !slices.Equal(versions, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("catalog versions %v, want 1..6", versions)
	}
	for i, e := range evs[1:5] {
		if len(e.RoomTypes) != i+1 {
			t.Errorf("version %d holds %d room types, want %d", e.CatalogVersion, len(e.RoomTypes), i+1)
		}
	}
	last := evs[5]
	if last.Name != "B" || last.Latitude != nil || len(last.RoomTypes) != 4 || !slices.Equal(last.Amenities, []string{"wifi"}) {
		t.Fatalf("last event: %+v", last)
	}
	got, err := s.GetHotel(ctx, h.ID)
	if err != nil || got.CatalogVersion != 6 || got.Name != "B" {
		t.Fatalf("hotel %+v, %v", got, err)
	}
	// A hotel homed elsewhere is not changed here.
	if _, err := s.UpdateHotel(ctx, uuid.NewString(), reservation.HotelPatch{Name: &name}); berth.ErrorCode(err) != berth.CodeNotFound {
		t.Fatalf("unknown hotel: %v", err)
	}
}

// Every change of a night writes what is left of it with the night's next
// version: setting rooms (inventory.changed), a hold and a cancel (their
// reservation events carry it).
func TestInventoryEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	s := postgres.NewStore(db, "us-east", 0)
	h, err := s.CreateHotel(ctx, reservation.Hotel{ID: uuid.NewString(), Name: "A", City: "X", Country: "DE",
		Timezone: "Europe/Berlin", HomeRegion: "us-east"})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := s.CreateRoomType(ctx, reservation.RoomType{ID: uuid.NewString(), HotelID: h.ID, Name: "R", MaxGuests: 2, PriceCents: 1000, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	d := reservation.DateOf(time.Now().UTC()).AddDays(3)
	if _, err := s.SetInventory(ctx, h.ID, rt.ID, d, d.AddDays(2), 2, false); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Hold(ctx, reservation.HoldRequest{HotelID: h.ID, RoomTypeID: rt.ID, GuestID: "g", ReservationID: uuid.NewString(),
		Stay: reservation.Stay{CheckIn: d, CheckOut: d.AddDays(1)}, Quantity: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Value.(reservation.Reservation)
	if _, err := s.Cancel(ctx, h.ID, r.ID, func(string) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	rows, err := dbtest.SQL(db).Query(ctx, `SELECT event_type, payload FROM outbox
		WHERE partition_id = $1 AND event_type <> $2 ORDER BY created_at, seq`, h.ID, reservation.EventCatalog)
	if err != nil {
		t.Fatal(err)
	}
	type nc = reservation.NightCount
	var got [][]nc
	var types []string
	for rows.Next() {
		var (
			typ     string
			payload []byte
			inv     reservation.InventoryChange
		)
		if err := rows.Scan(&typ, &payload); err != nil {
			t.Fatal(err)
		}
		if typ == reservation.EventInventory {
			err = json.Unmarshal(payload, &inv)
		} else {
			var w reservation.WithInventory
			err = json.Unmarshal(payload, &w)
			if w.Inventory == nil || w.ID != r.ID {
				t.Fatalf("%s without its inventory: %s", typ, payload)
			}
			inv = *w.Inventory
		}
		if err != nil {
			t.Fatal(err)
		}
		if inv.RoomTypeID != rt.ID || inv.HotelID != h.ID {
			t.Fatalf("%s names %s/%s", typ, inv.HotelID, inv.RoomTypeID)
		}
		slices.SortFunc(inv.Nights, func(a, b nc) int { return strings.Compare(a.Night, b.Night) })
		types, got = append(types, typ), append(got, inv.Nights)
	}
	rows.Close()
	n0, n1 := d.String(), d.AddDays(1).String()
	want := [][]nc{
		{{Night: n0, Available: 2, Version: 1}, {Night: n1, Available: 2, Version: 1}}, // set
		{{Night: n0, Available: 0, Version: 2}},                                        // hold
		{{Night: n0, Available: 2, Version: 3}},                                        // cancel
	}
	wantTypes := []string{reservation.EventInventory, reservation.EventHeld, reservation.EventCancelled}
	if !slices.Equal(types, wantTypes) || len(got) != len(want) {
		t.Fatalf("events %v, want %v", types, wantTypes)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("%s: %+v, want %+v", types[i], got[i], want[i])
		}
	}
}
