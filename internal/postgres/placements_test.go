package postgres_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
)

// Every table of the migrated schema that carries home_region must be
// re-homed by a move: a partition table added without being listed in
// partitionTables would stay behind in the old region.
func TestPartitionTablesCoverSchema(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	homed, listed := postgres.PartitionTablesForTest(context.Background(), postgres.NewPlacements(env.DB))
	if len(homed) == 0 {
		t.Fatal("no table with home_region found; is the schema migrated?")
	}
	for _, name := range homed {
		if !listed[name] {
			t.Errorf("table %s has home_region but is not listed in partitionTables (internal/postgres/placements.go)", name)
		}
	}
}

func TestMovePlacementRehomesEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east", Configure: func(c *httpapi.Config, s *postgres.Store) {
		c.Placements = postgres.NewPlacements(s.DB())
	}})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(5))
	guest := env.Token("g1", berth.RoleGuest)
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: guest, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": "g1", "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(1), "check_out": bookingtest.Date(3), "quantity": 1}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	// Rooms and their nights move with the hotel too.
	rooms := env.SeedRooms(h, "1", 2)
	r = env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/rooms/" + rooms[0] + "/out-of-order", Token: env.Admin(),
		Body: map[string]any{"from": bookingtest.Date(3), "to": bookingtest.Date(5), "reason": "paint"}})
	if r.Status != http.StatusOK {
		t.Fatalf("out of order: %d %s", r.Status, r.Body)
	}
	store := postgres.NewPlacements(env.DB)

	res, err := store.MovePlacement(ctx, berth.KindHotel, h.ID, "eu-west")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Moved || res.FromRegion != "us-east" || res.HomeRegion != "eu-west" || res.Version != 2 || res.Rows == 0 {
		t.Fatalf("move result %+v", res)
	}
	// Every row of the partition in every table now names eu-west.
	for _, q := range []string{
		`SELECT count(*) FROM hotels WHERE hotel_id = $1 AND home_region <> 'eu-west'`,
		`SELECT count(*) FROM room_types WHERE hotel_id = $1 AND home_region <> 'eu-west'`,
		`SELECT count(*) FROM room_inventory WHERE hotel_id = $1 AND home_region <> 'eu-west'`,
		`SELECT count(*) FROM reservations WHERE hotel_id = $1 AND home_region <> 'eu-west'`,
		`SELECT count(*) FROM rooms WHERE hotel_id = $1 AND home_region <> 'eu-west'`,
		`SELECT count(*) FROM room_nights WHERE hotel_id = $1 AND home_region <> 'eu-west'`,
		`SELECT 2 - count(*) FROM room_nights WHERE hotel_id = $1`,
		`SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND home_region <> 'eu-west'`,
		`SELECT count(*) FROM outbox WHERE partition_id = $1 AND home_region <> 'eu-west'`,
	} {
		var n int
		if err := dbtest.SQL(env.DB).QueryRow(ctx, q, h.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: %d rows left behind", q, n)
		}
	}
	// The move wrote one placement.moved event, homed with the partition.
	var payload []byte
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT payload FROM outbox WHERE partition_id = $1 AND event_type = 'placement.moved'`, h.ID).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	_ = json.Unmarshal(payload, &ev)
	if ev["from_region"] != "us-east" || ev["to_region"] != "eu-west" || ev["version"] != float64(2) {
		t.Fatalf("event %s", payload)
	}
	// The old region's booking service is now fenced out.
	r = env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: guest, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": "g1", "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(1), "check_out": bookingtest.Date(2), "quantity": 1}})
	if r.Status != http.StatusMisdirectedRequest || r.JSON()["home_region"] != "eu-west" {
		t.Fatalf("write to old home: %d %s", r.Status, r.Body)
	}
	// Moving to where it is already is a no-op.
	again, err := store.MovePlacement(ctx, berth.KindHotel, h.ID, "eu-west")
	if err != nil || again.Moved || again.Version != 2 {
		t.Fatalf("repeat move: %+v %v", again, err)
	}
	// Errors are domain errors.
	if _, err := store.MovePlacement(ctx, berth.KindHotel, "7d0f7c36-0000-4000-8000-000000000000", "eu-west"); berth.ErrorCode(err) != berth.CodeNotFound {
		t.Fatalf("unknown partition: %v", err)
	}
	if _, err := store.MovePlacement(ctx, berth.KindHotel, h.ID, "mars"); berth.ErrorCode(err) != berth.CodeInvalidRequest {
		t.Fatalf("bad region: %v", err)
	}
}

func TestPlacementRoutes(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{Region: "us-east", Configure: func(c *httpapi.Config, s *postgres.Store) {
		c.Placements = postgres.NewPlacements(s.DB())
	}})
	h := env.SeedHotel("", 2, 0, bookingtest.Date(1), bookingtest.Date(3))
	ops, admin := env.Token("ops", berth.RoleOps), env.Admin()
	if r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/placements", Token: admin}); r.Status != http.StatusForbidden {
		t.Fatalf("admin list: %d", r.Status)
	}
	if r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/placements"}); r.Status != http.StatusUnauthorized {
		t.Fatalf("anonymous list: %d", r.Status)
	}
	r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/placements?kind=hotel&region=us-east", Token: ops})
	list, _ := r.JSON()["placements"].([]any)
	if r.Status != http.StatusOK || len(list) != 1 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/placements?region=mars", Token: ops}); r.Code() != "invalid_request" {
		t.Fatalf("bad filter: %d %s", r.Status, r.Body)
	}
	r = env.Do(bookingtest.Request{Method: "POST", Path: "/v1/placements/hotel/" + h.ID + "/move", Token: ops, Body: map[string]any{"to_region": "ap-south"}})
	if r.Status != http.StatusOK || r.JSON()["home_region"] != "ap-south" || r.JSON()["version"] != float64(2) {
		t.Fatalf("move: %d %s", r.Status, r.Body)
	}
	// A move is not fenced: us-east may move a partition it is not home to.
	r = env.Do(bookingtest.Request{Method: "POST", Path: "/v1/placements/hotel/" + h.ID + "/move", Token: ops, Body: map[string]any{"to_region": "eu-west"}})
	if r.Status != http.StatusOK || r.JSON()["home_region"] != "eu-west" || r.JSON()["version"] != float64(3) {
		t.Fatalf("second move: %d %s", r.Status, r.Body)
	}
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/v1/placements/hotel/" + h.ID + "/move", `{"to_region":"mars"}`, 400},
		{"/v1/placements/hotel/" + h.ID + "/move", `{"to":"eu-west"}`, 400},
		{"/v1/placements/boat/" + h.ID + "/move", `{"to_region":"eu-west"}`, 404},
		{"/v1/placements/hotel/6a1e2b4c-0000-4000-8000-000000000000/move", `{"to_region":"eu-west"}`, 404},
		{"/v1/placements/clinic/" + h.ID + "/move", `{"to_region":"eu-west"}`, 404},
	} {
		if r := env.Do(bookingtest.Request{Method: "POST", Path: tc.path, Token: ops, Body: tc.body}); r.Status != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.path, tc.body, r.Status, r.Body, tc.status)
		}
	}
}
