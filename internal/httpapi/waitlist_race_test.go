package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/postgres"
)

// relayed takes the unsent outbox events of env's region through the real
// relay (postgres.Store.RelayOutbox), as the relay hands them to NATS, and
// returns them as the consumers receive them.
func relayed(t *testing.T, env *bookingtest.Env) []natsbus.Message {
	t.Helper()
	var out []natsbus.Message
	for {
		var batch []events.Record
		n, err := env.Store.RelayOutbox(context.Background(), 500, func(_ context.Context, recs []events.Record) ([]string, error) {
			ids := make([]string, len(recs))
			for i, r := range recs {
				ids[i] = r.EventID
			}
			batch = recs
			return ids, nil
		})
		if err != nil {
			t.Fatalf("relay: %v", err)
		}
		for _, r := range batch {
			e := events.FromRecord(r)
			data, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, natsbus.Message{Subject: events.Subject(r.Kind, r.PartitionID, r.Type), Data: data, Delivered: 1, Event: e})
		}
		if n == 0 {
			return out
		}
	}
}

// deliver hands every message to the waitlist consumer's handler, each
// twice at once (a redelivery racing the first delivery), from workers
// running in parallel, and fails the test on a handler error.
func deliver(t *testing.T, env *bookingtest.Env, msgs []natsbus.Message) {
	t.Helper()
	deliverTo(t, natsbus.WaitlistHandler(env.Store, slog.New(slog.NewTextHandler(io.Discard, nil))), msgs)
}

// deliverTo is deliver to handler h.
func deliverTo(t *testing.T, h natsbus.Handler, msgs []natsbus.Message) {
	t.Helper()
	work := make(chan natsbus.Message)
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(msgs))
	for range 8 {
		wg.Go(func() {
			for m := range work {
				if err := h(context.Background(), m); err != nil {
					errs <- fmt.Errorf("%s %s: %w", m.Event.Type, m.Event.ID, err)
				}
			}
		})
	}
	for _, m := range msgs {
		work <- m
		work <- m
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

type offerRow struct {
	entry, guest, status, reservation, resStatus string
	seq                                          int64
}

// waitlistRows reads a hotel's entries in line order, with their offers.
func waitlistRows(t *testing.T, env *bookingtest.Env, hotelID string) []offerRow {
	t.Helper()
	rows, err := dbtest.SQL(env.DB).Query(context.Background(), `SELECT e.entry_id::TEXT, e.guest_id, e.status, COALESCE(e.reservation_id::TEXT, ''),
			COALESCE(r.status, ''), e.seq
		FROM waitlist_entries e LEFT JOIN reservations r ON r.hotel_id = e.hotel_id AND r.reservation_id = e.reservation_id
		WHERE e.hotel_id = $1 ORDER BY e.seq`, hotelID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []offerRow
	for rows.Next() {
		var o offerRow
		if err := rows.Scan(&o.entry, &o.guest, &o.status, &o.reservation, &o.resStatus, &o.seq); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

func assertWaitlistAudit(t *testing.T, env *bookingtest.Env, hotelID string) {
	t.Helper()
	v, err := bookingtest.Violations(context.Background(), env.DB, []string{hotelID}, postgres.HotelInvariants...)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range v {
		t.Error("invariant violated: " + line)
	}
}

// 100 holds are cancelled at once while 70 other guests race for the freed
// rooms with holds of their own (trying again while they are refused:
// together they want more than the 100 rooms, so some waiters stay waiting), and the freeing events reach the waitlist
// consumer twice each, concurrently (a redelivery racing the first), then
// all again (a replay). The 50 waiters are served first come, first served:
// the offered ones are a prefix of the line, each has exactly one offer (a
// live hold made for them), no room is held twice, and the replay offers
// nothing more. `booking verify`'s checks agree.
func TestWaitlistOffersUnderConcurrentCancels(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			env := bookingtest.Start(t, bookingtest.Options{DB: dbOptions(iso)})
			const rooms, waiters, racers = 100, 50, 70
			h := env.SeedHotel("", rooms, 0, bookingtest.Date(29), bookingtest.Date(40))
			in, out := bookingtest.Date(30), bookingtest.Date(32)
			holds := make([]string, rooms)
			for i := range rooms {
				g := fmt.Sprintf("holder-%d", i)
				r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: env.Token(g, "guest"),
					IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": g, "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}})
				if r.Status != http.StatusCreated {
					t.Fatalf("hold %d: %d %s", i, r.Status, r.Body)
				}
				holds[i] = r.JSON()["reservation_id"].(string)
			}
			for i := range waiters {
				if r := join(env, h, fmt.Sprintf("waiter-%02d", i), in, out); r.Status != http.StatusCreated {
					t.Fatalf("join %d: %d %s", i, r.Status, r.Body)
				}
			}
			relayed(t, env) // the holds' and joins' events: nothing frees

			start := make(chan struct{})
			var wg sync.WaitGroup
			cancelled := make([]int, rooms)
			for i, id := range holds {
				tok := env.Token(fmt.Sprintf("holder-%d", i), "guest")
				wg.Go(func() {
					<-start
					r, err := env.Try(context.Background(), bookingtest.Request{Method: "POST",
						Path: "/v1/hotels/" + h.ID + "/reservations/" + id + "/cancel", Token: tok, IdemKey: bookingtest.NewKey()})
					if err == nil {
						cancelled[i] = r.Status
					}
				})
			}
			racerStatus := make([]int, racers)
			for i := range racers {
				g := fmt.Sprintf("racer-%d", i)
				tok := env.Token(g, "guest")
				wg.Go(func() {
					<-start
					// A racer keeps trying for a while: rooms free up as
					// the cancels commit, and the offers compete for them.
					for range 20 {
						r, err := env.Try(context.Background(), bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
							Token: tok, IdemKey: bookingtest.NewKey(),
							Body: map[string]any{"guest_id": g, "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}})
						if err != nil {
							return
						}
						if racerStatus[i] = r.Status; r.Status != http.StatusConflict {
							return
						}
						time.Sleep(time.Duration(5+i%10) * time.Millisecond)
					}
				})
			}
			// The consumer works while the cancels and holds run.
			done := make(chan struct{})
			var consumed []natsbus.Message
			var cw sync.WaitGroup
			cw.Go(func() {
				for {
					select {
					case <-done:
						msgs := relayed(t, env)
						deliver(t, env, msgs)
						consumed = append(consumed, msgs...)
						return
					default:
					}
					msgs := relayed(t, env)
					deliver(t, env, msgs)
					consumed = append(consumed, msgs...)
					time.Sleep(5 * time.Millisecond)
				}
			})
			close(start)
			wg.Wait()
			close(done)
			cw.Wait()
			for i, s := range cancelled {
				if s != http.StatusOK {
					t.Fatalf("cancel %d: %d", i, s)
				}
			}
			raced := 0
			for _, s := range racerStatus {
				switch s {
				case http.StatusCreated:
					raced++
				case http.StatusConflict:
				default:
					t.Fatalf("a racing hold answered %d", s)
				}
			}
			// The offers' own events (reservation.held, waitlist.offered)
			// wake nothing; what they left unsent is relayed too.
			deliver(t, env, relayed(t, env))

			line := waitlistRows(t, env, h.ID)
			offered := 0
			seen := map[string]bool{}
			for i, o := range line {
				if o.status == "offered" {
					if o.resStatus != "held" || seen[o.reservation] {
						t.Fatalf("entry %d: offered with reservation %s (%s), seen before: %v", i, o.reservation, o.resStatus, seen[o.reservation])
					}
					seen[o.reservation] = true
					if offered != i {
						t.Fatalf("entry %d (%s) was offered while entry %d still waits: not first come, first served", i, o.guest, offered)
					}
					offered++
				} else if o.status != "waiting" {
					t.Fatalf("entry %d is %s", i, o.status)
				}
			}
			if offered+raced > rooms {
				t.Fatalf("%d offers and %d racing holds for %d rooms", offered, raced, rooms)
			}
			if free := rooms - offered - raced; free > 0 && offered < waiters {
				t.Fatalf("%d rooms are free and %d waiters still wait (%d offers, %d racing holds)", free, waiters-offered, offered, raced)
			}
			t.Logf("%d offers, %d racing holds won, %d events consumed twice", offered, raced, len(consumed))
			assertWaitlistAudit(t, env, h.ID)

			// A replay of every event changes nothing.
			deliver(t, env, consumed)
			deliver(t, env, relayed(t, env))
			again := waitlistRows(t, env, h.ID)
			for i := range line {
				if again[i] != line[i] {
					t.Fatalf("the replay changed entry %d: %+v → %+v", i, line[i], again[i])
				}
			}
			assertWaitlistAudit(t, env, h.ID)
		})
	}
}

// An unconfirmed offer expires like a hold (the sweeper) and passes to the
// next waiter; that waiter sees the offer on their entry with its payment,
// pays and confirms it like any hold (a guest's confirm needs the verified
// payment), and the entry is booked. An offered entry cannot leave.
func TestWaitlistOfferLapsesToNextWaiter(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	env.Store.SetOfferTTL(time.Second)
	h := env.SeedHotel("", 1, 0, bookingtest.Date(29), bookingtest.Date(40))
	in, out := bookingtest.Date(30), bookingtest.Date(33)
	hold := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: env.Token("first", "guest"),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "first", "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}})
	if hold.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", hold.Status, hold.Body)
	}
	var entries []string
	for _, g := range []string{"w0", "w1", "w2"} {
		r := join(env, h, g, in, out)
		if r.Status != http.StatusCreated {
			t.Fatalf("join %s: %d %s", g, r.Status, r.Body)
		}
		entries = append(entries, r.JSON()["entry_id"].(string))
	}
	entry := func(i int) map[string]any {
		r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/waitlist/" + entries[i], Token: env.Token(fmt.Sprintf("w%d", i), "guest")})
		if r.Status != http.StatusOK {
			t.Fatalf("entry %d: %d %s", i, r.Status, r.Body)
		}
		return r.JSON()
	}
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + hold.JSON()["reservation_id"].(string) + "/cancel",
		Token: env.Token("first", "guest"), IdemKey: bookingtest.NewKey()})
	if r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	deliver(t, env, relayed(t, env))
	e0 := entry(0)
	offer, _ := e0["offer"].(map[string]any)
	if e0["status"] != "offered" || offer == nil || offer["reservation_status"] != "held" || e0["payment"] == nil {
		t.Fatalf("first waiter after the cancel: %v", e0)
	}
	if e1 := entry(1); e1["status"] != "waiting" || e1["position"] != float64(1) {
		t.Fatalf("second waiter: %v", e1)
	}
	if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/waitlist/" + entries[0] + "/leave",
		Token: env.Token("w0", "guest"), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusConflict || r.Code() != "invalid_state" {
		t.Fatalf("an offered entry left: %d %s", r.Status, r.Body)
	}
	res := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/reservations/" + offer["reservation_id"].(string), Token: env.Token("w0", "guest")})
	// The offer's hold carries the waiter's contacts: its notifications
	// (the offer first) reach the waiter's app by push.
	if res.JSON()["contact_push_token"] != "fcm:w0" || e0["contact_push_token"] != "fcm:w0" {
		t.Fatalf("the offer's hold or the entry without the waiter's push token: %s, %v", res.Body, e0)
	}
	if res.JSON()["waitlist_entry_id"] != entries[0] || res.JSON()["status"] != "held" {
		t.Fatalf("the offered reservation: %s", res.Body)
	}
	assertWaitlistAudit(t, env, h.ID)

	// Nobody confirms: the sweeper expires the offer, its event passes it on.
	time.Sleep(1100 * time.Millisecond)
	for {
		n, err := env.Store.ExpireHolds(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond) // the database's clock decides
	}
	deliver(t, env, relayed(t, env))
	if e0 := entry(0); e0["status"] != "lapsed" {
		t.Fatalf("the unconfirmed offer: %v", e0)
	}
	e1 := entry(1)
	offer, _ = e1["offer"].(map[string]any)
	if e1["status"] != "offered" || offer == nil {
		t.Fatalf("the next waiter after the lapse: %v", e1)
	}
	if e2 := entry(2); e2["status"] != "waiting" || e2["position"] != float64(1) {
		t.Fatalf("the third waiter: %v", e2)
	}
	assertWaitlistAudit(t, env, h.ID)

	// The waiter confirms the offer as a hold: without paying it is 402.
	resID := offer["reservation_id"].(string)
	confirm := func(ref string) bookingtest.Response {
		return env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + resID + "/confirm",
			Token: env.Token("w1", "guest"), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": ref}})
	}
	pay, _ := e1["payment"].(map[string]any)
	if r := confirm(pay["intent_id"].(string)); r.Status != http.StatusPaymentRequired {
		t.Fatalf("an unpaid offer confirmed: %d %s", r.Status, r.Body)
	}
	ref := env.PayHold(bookingtest.Response{Status: http.StatusOK, Body: []byte(mustJSON(e1))})
	if r := confirm(ref); r.Status != http.StatusOK || r.JSON()["status"] != "confirmed" {
		t.Fatalf("confirm the paid offer: %d %s", r.Status, r.Body)
	}
	if e1 := entry(1); e1["status"] != "booked" {
		t.Fatalf("a confirmed offer's entry: %v", e1)
	}
	deliver(t, env, relayed(t, env))
	if e2 := entry(2); e2["status"] != "waiting" {
		t.Fatalf("the third waiter got the booked room: %v", e2)
	}
	assertWaitlistAudit(t, env, h.ID)
}

// An offer is a hold and counts toward the per-guest limits: a waiter whose
// guest is at the hold limit is passed over (keeps their place) and the room
// goes to the next waiter; the audit's FIFO check accepts that. A cancelled
// offer declines its entry and passes the room on.
func TestWaitlistOfferRespectsGuestLimits(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{GuestLimits: berth.GuestLimits{Holds: 1, Quantity: 50}})
	h := env.SeedHotel("", 2, 0, bookingtest.Date(29), bookingtest.Date(40))
	in, out := bookingtest.Date(30), bookingtest.Date(32)
	hold := func(g, ci, co string) bookingtest.Response {
		r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: env.Token(g, "guest"),
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": g, "room_type_id": h.RoomTypeID, "check_in": ci, "check_out": co, "quantity": 1}})
		if r.Status != http.StatusCreated {
			t.Fatalf("hold of %s: %d %s", g, r.Status, r.Body)
		}
		return r
	}
	first := hold("a", in, out)
	hold("w0", bookingtest.Date(34), bookingtest.Date(35)) // w0 is at the hold limit
	hold("b", in, out)                                     // the stay is sold out
	var entries []string
	for _, g := range []string{"w0", "w1", "w2"} {
		r := join(env, h, g, in, out)
		if r.Status != http.StatusCreated {
			t.Fatalf("join %s: %d %s", g, r.Status, r.Body)
		}
		entries = append(entries, r.JSON()["entry_id"].(string))
	}
	status := func(i int) map[string]any {
		r := env.Do(bookingtest.Request{Method: "GET", Path: "/v1/hotels/" + h.ID + "/waitlist/" + entries[i], Token: env.Admin()})
		return r.JSON()
	}
	cancel := func(resID, g string) {
		if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + resID + "/cancel",
			Token: env.Token(g, "guest"), IdemKey: bookingtest.NewKey()}); r.Status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		deliver(t, env, relayed(t, env))
	}
	cancel(first.JSON()["reservation_id"].(string), "a")
	if s := status(0); s["status"] != "waiting" || s["position"] != float64(1) {
		t.Fatalf("the waiter at the limit: %v", s)
	}
	s1 := status(1)
	if s1["status"] != "offered" {
		t.Fatalf("the next waiter: %v", s1)
	}
	assertWaitlistAudit(t, env, h.ID)

	// The offered guest declines: the room passes on — past w0, still at
	// the limit — to w2.
	cancel(s1["offer"].(map[string]any)["reservation_id"].(string), "w1")
	if s := status(1); s["status"] != "declined" {
		t.Fatalf("a cancelled offer's entry: %v", s)
	}
	if s := status(2); s["status"] != "offered" {
		t.Fatalf("the third waiter after the decline: %v", s)
	}
	if s := status(0); s["status"] != "waiting" {
		t.Fatalf("the waiter at the limit: %v", s)
	}
	assertWaitlistAudit(t, env, h.ID)
}

// A guest who joins while rooms of their stay are free is not left waiting
// for the next free: the join's own event wakes the waitlist and the guest
// is offered a room (first come, first served: an earlier waiter whose stay
// fits is served first), once however often the event is delivered.
func TestWaitlistJoinWhileRoomsAreFree(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 2, 0, bookingtest.Date(29), bookingtest.Date(40))
	in, out := bookingtest.Date(30), bookingtest.Date(32)
	for _, g := range []string{"x", "y"} {
		if r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: env.Token(g, "guest"),
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": g, "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": 1}}); r.Status != http.StatusCreated {
			t.Fatalf("hold %s: %d %s", g, r.Status, r.Body)
		}
	}
	if r := join(env, h, "first", in, out); r.Status != http.StatusCreated {
		t.Fatalf("join first: %d %s", r.Status, r.Body)
	}
	deliver(t, env, relayed(t, env))
	if line := waitlistRows(t, env, h.ID); line[0].status != "waiting" {
		t.Fatalf("sold out, yet the first waiter is %s", line[0].status)
	}
	// Inventory raised by one room, relayed later (a consumer behind):
	// meanwhile a second guest joins. Whichever event comes first serves
	// the line in order: the room goes to the first waiter.
	if r := env.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + h.ID + "/room-types/" + h.RoomTypeID + "/inventory", Token: env.Admin(),
		Body: map[string]any{"from": bookingtest.Date(29), "to": bookingtest.Date(40), "total_rooms": 3}}); r.Status != http.StatusOK {
		t.Fatalf("raise inventory: %d %s", r.Status, r.Body)
	}
	if r := join(env, h, "second", in, out); r.Status != http.StatusCreated {
		t.Fatalf("join second: %d %s", r.Status, r.Body)
	}
	msgs := relayed(t, env)
	var joins []natsbus.Message
	for _, m := range msgs {
		if m.Event.Type == "waitlist.joined" {
			joins = append(joins, m)
		}
	}
	deliver(t, env, joins) // the join's event alone, twice at once
	line := waitlistRows(t, env, h.ID)
	if line[0].status != "offered" || line[1].status != "waiting" {
		t.Fatalf("after the join's event: first %s, second %s", line[0].status, line[1].status)
	}
	deliver(t, env, msgs)
	// A third guest joins while a room is free: offered at once.
	if r := env.Do(bookingtest.Request{Method: "PUT", Path: "/v1/hotels/" + h.ID + "/room-types/" + h.RoomTypeID + "/inventory", Token: env.Admin(),
		Body: map[string]any{"from": bookingtest.Date(29), "to": bookingtest.Date(40), "total_rooms": 5}}); r.Status != http.StatusOK {
		t.Fatalf("raise inventory: %d %s", r.Status, r.Body)
	}
	deliver(t, env, relayed(t, env)) // second is served by the raise
	if r := join(env, h, "third", in, out); r.Status != http.StatusCreated {
		t.Fatalf("join third: %d %s", r.Status, r.Body)
	}
	deliver(t, env, relayed(t, env))
	line = waitlistRows(t, env, h.ID)
	for i, o := range line {
		if o.status != "offered" || o.resStatus != "held" {
			t.Fatalf("entry %d (%s) is %s (%s)", i, o.guest, o.status, o.resStatus)
		}
	}
	assertWaitlistAudit(t, env, h.ID)
}
