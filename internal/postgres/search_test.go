package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/search"
)

// Search is answered from indexes: the city lookup uses hotels_city_key_idx
// and the per-room-type nights use the inventory primary key, on a catalog
// large enough (3,000 hotels in 100 cities, 60,000 nights) that the planner
// would rather scan if the indexes did not fit.
func TestSearchUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	today := reservation.DateOf(time.Now().UTC())
	for _, stmt := range []string{
		`INSERT INTO hotels (hotel_id, home_region, name, city, city_key, country, timezone)
		 SELECT gen_random_uuid(), 'us-east', 'Hotel ' || i, 'City ' || (i % 100), 'city ' || (i % 100), 'DE', 'Europe/Berlin'
		 FROM generate_series(1, 3000) AS i`,
		`INSERT INTO room_types (hotel_id, room_type_id, home_region, name, max_guests, price_cents, currency)
		 SELECT hotel_id, gen_random_uuid(), 'us-east', 'Type ' || k, k * 2, k * 10000, 'EUR'
		 FROM hotels, generate_series(1, 2) AS k`,
		`INSERT INTO room_inventory (hotel_id, room_type_id, night, home_region, total_rooms, sell_limit)
		 SELECT hotel_id, room_type_id, $1::DATE + d, 'us-east', 5, 5
		 FROM room_types, generate_series(0, 9) AS d`,
		`ANALYZE hotels`, `ANALYZE room_types`, `ANALYZE room_inventory`,
	} {
		var args []any
		if strings.Contains(stmt, "$1") {
			args = []any{today.Time()}
		}
		if _, err := dbtest.SQL(db).Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	sql, args := postgres.SearchSQLForTest(search.Query{City: "City 7",
		Stay: reservation.Stay{CheckIn: today.AddDays(2), CheckOut: today.AddDays(5)}, Guests: 2, Limit: 20})
	rows, err := dbtest.SQL(db).Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, idx := range []string{"hotels_city_key_idx", "room_inventory_pkey"} {
		if !strings.Contains(plan.String(), idx) {
			t.Errorf("plan does not use %s:\n%s", idx, plan.String())
		}
	}
	if strings.Contains(plan.String(), "Seq Scan on room_inventory") || strings.Contains(plan.String(), "Seq Scan on hotels") {
		t.Errorf("plan scans a whole table:\n%s", plan.String())
	}

	// And it answers: every hotel of the city qualifies for 2 guests.
	store := postgres.NewStore(db, "us-east", 0)
	page, err := store.SearchHotels(ctx, search.Query{City: "CITY 7",
		Stay: reservation.Stay{CheckIn: today.AddDays(2), CheckOut: today.AddDays(5)}, Guests: 2, Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Hotels) != 20 || !page.More {
		t.Fatalf("page: %d hotels, more=%v; want 20 of 30, more", len(page.Hotels), page.More)
	}
	t.Logf("search plan:\n%s", plan.String())
}
