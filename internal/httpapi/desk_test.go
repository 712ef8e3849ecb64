package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// confirmedStay holds and confirms a stay of qty rooms for guest, as admin.
func confirmedStay(t *testing.T, env *bookingtest.Env, h bookingtest.Hotel, guest string, in, out, qty int) string {
	t.Helper()
	admin := env.Admin()
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: admin, IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID, "check_in": bookingtest.Date(in), "check_out": bookingtest.Date(out), "quantity": qty}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["reservation_id"].(string)
	r = env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/confirm", Token: admin,
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": "pay-" + guest}})
	if r.Status != http.StatusOK {
		t.Fatalf("confirm: %d %s", r.Status, r.Body)
	}
	return id
}

func desk(env *bookingtest.Env, h bookingtest.Hotel, id, action string, body any) bookingtest.Response {
	return env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/" + action,
		Token: env.Admin(), IdemKey: bookingtest.NewKey(), Body: body})
}

// A stay from arrival to departure: the desk sees the arrival, check-in
// assigns a room for every night, a replay answers the same, an early
// departure gives the rest back; the no-show job marks a guest who never
// came, keeps the first night charged and frees the rest, once.
func TestStayAtTheDesk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 3, 0, bookingtest.Date(-2), bookingtest.Date(20))
	rooms := env.SeedRooms(h, "3", 2)
	stay := confirmedStay(t, env, h, "ann", 0, 3, 1)
	late := confirmedStay(t, env, h, "bob", 0, 4, 1)

	// Refusals change nothing.
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + stay + "/check-in", Token: env.Admin()})
	if r.Status != http.StatusBadRequest || r.Code() != "idempotency_key_required" {
		t.Fatalf("check-in without a key: %d %s", r.Status, r.Body)
	}
	early := confirmedStay(t, env, h, "cy", 5, 6, 1)
	if r := desk(env, h, early, "check-in", nil); r.Status != http.StatusConflict || r.Code() != "invalid_state" {
		t.Fatalf("check-in before arrival: %d %s", r.Status, r.Body)
	}
	if r := desk(env, h, stay, "check-out", nil); r.Status != http.StatusConflict || r.Code() != "invalid_state" {
		t.Fatalf("check-out before check-in: %d %s", r.Status, r.Body)
	}
	if r := desk(env, h, stay, "check-in", map[string]any{"room_ids": []string{"nope"}}); r.Status != http.StatusBadRequest {
		t.Fatalf("bad room id: %d %s", r.Status, r.Body)
	}

	// The desk picks room 2 for ann; a replay answers the same.
	key := bookingtest.NewKey()
	req := bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + stay + "/check-in", Token: env.Admin(),
		IdemKey: key, Body: map[string]any{"room_ids": []string{rooms[1]}}}
	first := env.Do(req)
	if first.Status != http.StatusOK || first.JSON()["status"] != "checked_in" {
		t.Fatalf("check-in: %d %s", first.Status, first.Body)
	}
	assigned := first.JSON()["rooms"].([]any)
	if len(assigned) != 1 || assigned[0].(map[string]any)["room_id"] != rooms[1] {
		t.Fatalf("rooms = %v, want the picked room", assigned)
	}
	replay := env.Do(req)
	if replay.Status != http.StatusOK || replay.Header.Get("Idempotent-Replayed") != "true" || string(replay.Body) != string(first.Body) {
		t.Fatalf("replay: %d %s", replay.Status, replay.Body)
	}
	if r := desk(env, h, stay, "check-in", nil); r.Status != http.StatusConflict || r.Code() != "invalid_state" {
		t.Fatalf("second check-in: %d %s", r.Status, r.Body)
	}
	// Room 2 is taken: bob cannot have it, but gets room 1 automatically.
	if r := desk(env, h, late, "check-in", map[string]any{"room_ids": []string{rooms[1]}}); r.Status != http.StatusConflict || r.Code() != "no_room_free" {
		t.Fatalf("check-in into an occupied room: %d %s", r.Status, r.Body)
	}

	// The arrivals of today list both.
	day := time.Now().In(mustZone(t, "Europe/Berlin")).Format(time.DateOnly)
	r = env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/arrivals?date=" + day, Token: env.Admin()})
	if r.Status != http.StatusOK {
		t.Fatalf("arrivals: %d %s", r.Status, r.Body)
	}
	if day == bookingtest.Date(0) && len(r.JSON()["arrivals"].([]any)) != 2 {
		t.Fatalf("arrivals = %s, want ann and bob", r.Body)
	}

	// Ann leaves early: the nights from today on come back.
	before := availableOn(t, env, h, 0, 3)
	r = desk(env, h, stay, "check-out", nil)
	if r.Status != http.StatusOK || r.JSON()["status"] != "checked_out" || r.JSON()["released_from"] != day {
		t.Fatalf("check-out: %d %s", r.Status, r.Body)
	}
	after := availableOn(t, env, h, 0, 3)
	for i := range after {
		if after[i] != before[i]+1 && bookingtest.Date(i) >= day {
			t.Fatalf("availability %v → %v: the nights from %s did not come back", before, after, day)
		}
	}

	// Bob never comes: the job marks him once the cut-off passed.
	n, err := env.Store.MarkNoShows(ctx, time.Now(), postgres.NoShowOptions{Cutoff: 12 * time.Hour})
	if err != nil || n != 0 {
		t.Fatalf("no-shows before the cut-off: %d, %v", n, err)
	}
	later := time.Now().Add(49 * time.Hour)
	if n, err := env.Store.MarkNoShows(ctx, later, postgres.NoShowOptions{Cutoff: 12 * time.Hour}); err != nil || n != 1 {
		t.Fatalf("no-shows: %d, %v; want 1", n, err)
	}
	if n, err := env.Store.MarkNoShows(ctx, later, postgres.NoShowOptions{Cutoff: 12 * time.Hour}); err != nil || n != 0 {
		t.Fatalf("no-shows again: %d, %v; want 0", n, err)
	}
	r = env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/reservations/" + late, Token: env.Admin()})
	if r.JSON()["status"] != "no_show" || r.JSON()["released_from"] != bookingtest.Date(1) {
		t.Fatalf("no-show: %s", r.Body)
	}
	var amount int64
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT (payload->>'amount_cents')::INT8 FROM outbox
		WHERE aggregate_id = $1 AND event_type = 'reservation.no_show'`, late).Scan(&amount); err != nil || amount != 10000 {
		t.Fatalf("no-show event amount = %d, %v; want the first night, 10000", amount, err)
	}
	if r := desk(env, h, late, "check-in", nil); r.Status != http.StatusConflict || r.Code() != "invalid_state" {
		t.Fatalf("check-in after the no-show: %d %s", r.Status, r.Body)
	}
	env.AssertInventory()
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// 50 confirmed guests of one room type arrive at once for its last free
// room: one gets it, 49 hear 409 no_room_free, and the database shows the
// room given to one stay on every night — never two.
func TestCheckInRaceForLastRoom(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			env := bookingtest.Start(t, bookingtest.Options{DB: dbOptions(iso)})
			h := env.SeedHotel("", 60, 0, bookingtest.Date(-1), bookingtest.Date(10))
			rooms := env.SeedRooms(h, "4", 3)
			// Two of the three rooms are occupied already.
			for i := range 2 {
				id := confirmedStay(t, env, h, fmt.Sprintf("early-%d", i), 0, 3, 1)
				if r := desk(env, h, id, "check-in", nil); r.Status != http.StatusOK {
					t.Fatalf("check-in: %d %s", r.Status, r.Body)
				}
			}
			const guests = 50
			ids := make([]string, guests)
			for i := range ids {
				ids[i] = confirmedStay(t, env, h, fmt.Sprintf("g%d", i), 0, 3, 1)
			}
			outcome := make([]string, guests)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/check-in",
						Token: env.Admin(), IdemKey: bookingtest.NewKey()})
					if err != nil {
						outcome[i] = err.Error()
						return
					}
					outcome[i] = fmt.Sprintf("%d %s", r.Status, r.Code())
				}()
			}
			close(start)
			wg.Wait()
			count := map[string]int{}
			for _, o := range outcome {
				count[o]++
			}
			if count["200 "] != 1 || count["409 no_room_free"] != guests-1 {
				t.Fatalf("outcomes = %v, want one 200 and %d 409 no_room_free", count, guests-1)
			}
			// From the database: every room-night of the three rooms has one
			// stay, the last room's three nights the same one, checked in.
			var roomNights, stays, checkedIn int
			err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*), count(DISTINCT reservation_id),
				(SELECT count(*) FROM reservations WHERE hotel_id = $1 AND status = 'checked_in')
				FROM room_nights WHERE hotel_id = $1 AND room_id = $2`, h.ID, rooms[2]).Scan(&roomNights, &stays, &checkedIn)
			if err != nil {
				t.Fatal(err)
			}
			if roomNights != 3 || stays != 1 || checkedIn != 3 {
				t.Fatalf("last room: %d room-nights of %d stays, %d stays checked in; want 3 of 1, 3", roomNights, stays, checkedIn)
			}
			env.AssertInventory()
		})
	}
}

// More guests than rooms check in at once, many desks in parallel: every
// room is given to a guest — nobody hears no_room_free while a room is
// still free (a check-in that loses a room to a concurrent one tries the
// next) — and no room twice.
func TestCheckInsFillEveryFreeRoom(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			env := bookingtest.Start(t, bookingtest.Options{DB: dbOptions(iso)})
			const rooms, guests = 48, 60
			h := env.SeedHotel("", guests, 0, bookingtest.Date(-1), bookingtest.Date(10))
			env.SeedRooms(h, "5", rooms)
			ids := make([]string, guests)
			for i := range ids {
				ids[i] = confirmedStay(t, env, h, fmt.Sprintf("f%d", i), 0, 2, 1)
			}
			outcome := make([]string, guests)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/check-in",
						Token: env.Admin(), IdemKey: bookingtest.NewKey()})
					if err != nil {
						outcome[i] = err.Error()
						return
					}
					outcome[i] = fmt.Sprintf("%d %s", r.Status, r.Code())
				}()
			}
			close(start)
			wg.Wait()
			count := map[string]int{}
			for _, o := range outcome {
				count[o]++
			}
			if count["200 "] != rooms || count["409 no_room_free"] != guests-rooms {
				t.Fatalf("outcomes = %v, want %d 200 and %d 409 no_room_free", count, rooms, guests-rooms)
			}
			var used, stays int
			if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(DISTINCT room_id), count(DISTINCT reservation_id)
				FROM room_nights WHERE hotel_id = $1`, h.ID).Scan(&used, &stays); err != nil {
				t.Fatal(err)
			}
			if used != rooms || stays != rooms {
				t.Fatalf("%d rooms used by %d stays; want %d and %d", used, stays, rooms, rooms)
			}
			env.AssertInventory()
		})
	}
}

// A room another desk holds but gives back is not a reason to walk a
// guest: the one free room is locked by another desk's transaction (as a
// desk holds a room it tried and gave back until it commits); a check-in
// arriving meanwhile waits for that desk instead of answering no_room_free,
// and gets the room once the other desk lets go.
func TestCheckInWaitsForARoomAnotherDeskHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{DB: dbOptions(postgres.ReadCommitted)})
	h := env.SeedHotel("", 10, 0, bookingtest.Date(-1), bookingtest.Date(10))
	rooms := env.SeedRooms(h, "6", 1)
	id := confirmedStay(t, env, h, "late", 0, 2, 1)
	sql := dbtest.SQL(env.DB)
	other, err := sql.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, `SELECT 1 FROM rooms WHERE hotel_id = $1 AND room_id = $2 FOR UPDATE`, h.ID, rooms[0]); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		code   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/check-in",
			Token: env.Admin(), IdemKey: bookingtest.NewKey()})
		if err != nil {
			done <- answer{err: err}
			return
		}
		done <- answer{status: r.Status, code: r.Code()}
	}()
	// Let the other desk go only once the check-in answered or waits for it.
	var got *answer
	for deadline := time.Now().Add(30 * time.Second); got == nil; {
		select {
		case a := <-done:
			got = &a
			continue
		default:
		}
		waiting, err := dbtest.LockWaiters(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the check-in neither answered nor waited for the other desk")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got == nil {
		a := <-done
		got = &a
	}
	if got.err != nil || got.status != http.StatusOK {
		t.Fatalf("check-in while another desk held the free room: %d %s %v; want 200 once it let go", got.status, got.code, got.err)
	}
	var assigned string
	if err := sql.QueryRow(ctx, `SELECT string_agg(DISTINCT room_id::TEXT, ',') FROM room_nights WHERE hotel_id = $1 AND reservation_id = $2`,
		h.ID, id).Scan(&assigned); err != nil {
		t.Fatal(err)
	}
	if assigned != rooms[0] {
		t.Fatalf("rooms assigned: %q, want %s", assigned, rooms[0])
	}
	env.AssertInventory()
}

// A late check-in races the no-show job for the same guests: each stay
// ends checked in or a no-show, never both, and the answers agree with the
// database.
func TestCheckInRacesNoShowJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bookingtest.Start(t, bookingtest.Options{DB: dbOptions(postgres.ReadCommitted)})
	h := env.SeedHotel("", 40, 0, bookingtest.Date(-1), bookingtest.Date(10))
	env.SeedRooms(h, "5", 40)
	const guests = 30
	ids := make([]string, guests)
	for i := range ids {
		ids[i] = confirmedStay(t, env, h, fmt.Sprintf("g%d", i), 0, 3, 1)
	}
	checkedIn := map[string]bool{}
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		marked int
		jobErr error
	)
	// The job walks the stays in id order (same check-in, same hotel); the
	// desk takes them from the other end with three clerks, so the two meet
	// somewhere in the middle and race for the same stays there.
	slices.Sort(ids)
	queue := make(chan string, guests)
	for i := range ids {
		queue <- ids[guests-1-i]
	}
	close(queue)
	start := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for id := range queue {
				r, err := env.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/check-in",
					Token: env.Admin(), IdemKey: bookingtest.NewKey()})
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("check-in: %v", err)
				case r.Status == http.StatusOK:
					checkedIn[id] = true
				case r.Status != http.StatusConflict || r.Code() != "invalid_state":
					t.Errorf("check-in: %d %s", r.Status, r.Body)
				}
				mu.Unlock()
			}
		}()
	}
	for range 3 { // three job runs at once, as three booking services would
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			n, err := env.Store.MarkNoShows(ctx, time.Now().Add(49*time.Hour), postgres.NoShowOptions{Cutoff: 12 * time.Hour})
			mu.Lock()
			marked += n
			if err != nil {
				jobErr = err
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if jobErr != nil {
		t.Fatal(jobErr)
	}
	if len(checkedIn)+marked != guests {
		t.Fatalf("%d checked in + %d marked no-show = %d, want %d", len(checkedIn), marked, len(checkedIn)+marked, guests)
	}
	rows, err := dbtest.SQL(env.DB).Query(ctx, `SELECT reservation_id::TEXT, status FROM reservations WHERE hotel_id = $1`, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "checked_in", false: "no_show"}[checkedIn[id]]; status != want {
			t.Errorf("reservation %s is %s, the answers said %s", id, status, want)
		}
	}
	var events int
	if err := dbtest.SQL(env.DB).QueryRow(ctx, `SELECT count(*) FROM outbox WHERE partition_id = $1 AND event_type = 'reservation.no_show'`,
		h.ID).Scan(&events); err != nil || events != marked {
		t.Fatalf("%d no-show events for %d marked (%v)", events, marked, err)
	}
	t.Logf("%d checked in, %d no-shows", len(checkedIn), marked)
	env.AssertInventory()
}
