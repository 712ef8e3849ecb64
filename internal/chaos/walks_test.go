package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// Walks under the faults: guests arriving today at overbooked hotels. Each
// region has an original hotel with far fewer physical rooms than it sells
// (and a small suite type to upgrade to), and a sister hotel of the same
// chain and city homed in the other region — so every relocation saga
// crosses regions and runs through both regions' relays, the broker and
// both regions' walk consumers while the faults kill processes, crash
// PostgreSQL, restart NATS and slow or cut every link. One sister has few
// rooms, so its walks are refused once it is full and undone.

// walkPair is one original hotel and the sister its desk relocates to.
type walkPair struct {
	Orig   hotel
	Suite  string // room type id of the original's suite (the upgrade)
	Sister hotel
}

// walkChain is one arriving guest: a hold and confirm for tonight, the
// check-in, and — when it finds no room — the desk's upgrade or relocation.
type walkChain struct {
	Pair     *walkPair
	Hold     *op
	Confirm  *op
	CheckIn  *op
	Upgrade  *op
	Relocate *op
}

// walkResumeAfter is the suite's BERTH_WALK_RESUME_AFTER: a walk left
// walking (its messages skipped or dead-lettered) is asked again soon
// enough for the audit to see it settle.
const walkResumeAfter = 10 * time.Second

// seedWalks creates the two pairs (original in one region, sister in the
// other), all of one chain in one city, in a zone where it is mid-day so
// "today" does not change during the run. Each original sells 125 % of 320
// rooms of its booked type but has 2 physical rooms (every later arrival
// is walked); its suite type has 2 rooms to upgrade to. The first sister
// has 400 rooms, the second 10 (its later walks are undone, and those
// guests keep their nights at the original). The counts keep the
// originals selling through the long run's faults.
func (s *stack) seedWalks(t *testing.T) ([]*walkPair, time.Time) {
	t.Helper()
	loc := midDayZone(t)
	today := time.Now().In(loc)
	today = time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, time.UTC)
	from, to := today.AddDate(0, 0, -1).Format(time.DateOnly), today.AddDate(0, 0, 4).Format(time.DateOnly)
	mkHotel := func(region, name string) string {
		h := s.adminCall(t, "POST", s.urls[region]+"/v1/hotels", map[string]any{"name": name, "city": "Porto", "country": "PT",
			"timezone": loc.String(), "home_region": region, "chain": "Chaos Walks"})
		return h["hotel_id"].(string)
	}
	mkType := func(region, hotelID, name string, price, overbooking, total int) string {
		base := s.urls[region] + "/v1/hotels/" + hotelID
		rt := s.adminCall(t, "POST", base+"/room-types", map[string]any{"name": name, "max_guests": 2, "price_cents": price,
			"currency": "EUR", "overbooking_pct": overbooking})
		id := rt["room_type_id"].(string)
		s.adminCall(t, "PUT", base+"/room-types/"+id+"/inventory", map[string]any{"from": from, "to": to, "total_rooms": total})
		return id
	}
	mkRooms := func(region, hotelID, typeID, prefix string, n int) {
		for i := range n {
			s.adminCall(t, "POST", s.urls[region]+"/v1/hotels/"+hotelID+"/rooms",
				map[string]any{"room_type_id": typeID, "number": fmt.Sprintf("%s%02d", prefix, i+1), "floor": 1})
		}
	}
	var pairs []*walkPair
	for i, r := range s.regions {
		other := s.regions[(i+1)%len(s.regions)]
		p := &walkPair{}
		p.Orig = hotel{ID: mkHotel(r, "Chaos walks "+r), Region: r}
		p.Orig.RoomTypeID = mkType(r, p.Orig.ID, "Double", 12000, 25, 320)
		mkRooms(r, p.Orig.ID, p.Orig.RoomTypeID, "D", 2)
		p.Suite = mkType(r, p.Orig.ID, "Suite", 30000, 0, 2)
		mkRooms(r, p.Orig.ID, p.Suite, "S", 2)
		sisterRooms := 400
		if i == 1 {
			sisterRooms = 10
		}
		p.Sister = hotel{ID: mkHotel(other, "Chaos walks sister of "+r), Region: other}
		p.Sister.RoomTypeID = mkType(other, p.Sister.ID, "Double", 9000, 0, sisterRooms)
		pairs = append(pairs, p)
	}
	s.walkPairs = pairs
	return pairs, today
}

// walkKillFault kills the us-east booking service while relocation sagas
// have a step pending there: a walk of the us-east original held at its
// sister (eu-west) but not yet walked — us-east's consumer is finishing it
// or about to — or a walk of the eu-west original requested of its sister
// in us-east and not yet decided there. It slows us-east's database link
// (700 ms) so those steps' transactions are in flight for seconds, and
// kills as soon as one such walk exists (a step's transaction dies with
// the process, its message unacked, and comes back to the restarted
// consumer). The report says how many walks were caught.
func (s *stack) walkKillFault() fault {
	var caught string
	return fault{Name: "kill-walk", Target: "booking us-east (walk consumer)",
		What: "kill -9 of the us-east booking service while relocation sagas have a step pending there (held at the sister, not yet walked; or requested of its sister, not yet decided)",
		inject: func(ctx context.Context) error {
			caught = ""
			if len(s.walkPairs) < 2 {
				s.booking["us-east"].kill()
				caught = "no walk hotels: killed at an arbitrary point"
				return nil
			}
			var east, west *walkPair
			for _, p := range s.walkPairs {
				switch p.Orig.Region {
				case "us-east":
					east = p
				case "eu-west":
					west = p
				}
			}
			if err := s.prox.toxic("pg-us-east", "latency", "downstream", `{"latency":700}`); err != nil {
				return err
			}
			var lastErr error
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				rows, err := dbtest.SQL(s.db).Query(ctx, `SELECT r.reservation_id::TEXT, r.hotel_id = $1::UUID FROM reservations r
					WHERE r.status = 'walking' AND (
					  (r.hotel_id = $1::UUID AND EXISTS (SELECT 1 FROM walk_outcomes o WHERE o.hotel_id = r.walk_hotel_id AND o.walk_id = r.walk_reservation_id))
					  OR (r.hotel_id = $2::UUID AND NOT EXISTS (SELECT 1 FROM walk_outcomes o WHERE o.hotel_id = r.walk_hotel_id AND o.walk_id = r.walk_reservation_id)))`,
					east.Orig.ID, west.Orig.ID)
				if err != nil {
					lastErr = err
					time.Sleep(50 * time.Millisecond)
					continue
				}
				var ids []string
				var held, requested int
				for rows.Next() {
					var id string
					var atEast bool
					if rows.Scan(&id, &atEast) == nil {
						ids = append(ids, id)
						if atEast {
							held++
						} else {
							requested++
						}
					}
				}
				rows.Close()
				if len(ids) > 0 {
					s.booking["us-east"].kill()
					s.caughtWalks = append(s.caughtWalks, ids...)
					caught = fmt.Sprintf("killed with %d walk(s) held at the sister and not yet walked in us-east, %d requested of the us-east sister and not yet decided", held, requested)
					return nil
				}
				time.Sleep(20 * time.Millisecond)
			}
			s.booking["us-east"].kill()
			caught = "no walk pending in us-east within 30 s: killed at an arbitrary point"
			if lastErr != nil {
				caught += fmt.Sprintf(" (last query error: %v)", lastErr)
			}
			return nil
		},
		heal: func(context.Context) (string, error) {
			s.prox.heal("pg-us-east")
			return caught, s.booking["us-east"].start()
		},
	}
}

// walk runs one arriving guest through the routers as the desk would: a
// hold for tonight (one or two nights), its confirmation, the check-in;
// when the check-in finds no room free, a quarter of the time an upgrade
// to the suite, and otherwise (or when the upgrade finds no suite free) a
// relocation to the sister hotel — whatever the options said, so that a
// full sister's refusal and the undo run too.
func (l *load) walk(rng *rand.Rand) {
	p := l.walkPairs[rng.IntN(len(l.walkPairs))]
	guest := "chaos-w-" + uuid.NewString()
	c := &walkChain{Pair: p}
	via := rng.IntN(len(l.urls))
	in := l.walkDay
	c.Hold = l.do(p.Orig, guest, via, "walk-hold", "/v1/hotels/"+p.Orig.ID+"/reservations", map[string]any{
		"guest_id": guest, "room_type_id": p.Orig.RoomTypeID, "check_in": in.Format(time.DateOnly),
		"check_out": in.AddDate(0, 0, 1+rng.IntN(2)).Format(time.DateOnly), "quantity": 1})
	l.mu.Lock()
	l.walks = append(l.walks, c)
	l.mu.Unlock()
	if c.Hold.Final != outOK || c.Hold.ResID == "" {
		return
	}
	base := "/v1/hotels/" + p.Orig.ID + "/reservations/" + c.Hold.ResID
	if c.Confirm = l.do(p.Orig, guest, via, "walk-confirm", base+"/confirm", map[string]any{"payment_ref": "pay-" + guest}); c.Confirm.Final != outOK {
		return
	}
	if c.CheckIn = l.do(p.Orig, guest, via, "check-in", base+"/check-in", map[string]any{}); c.CheckIn.Code != "no_room_free" {
		return
	}
	if rng.IntN(4) == 0 {
		c.Upgrade = l.do(p.Orig, guest, via, "upgrade", base+"/upgrade", map[string]any{"room_type_id": p.Suite})
		if c.Upgrade.Code != "no_room_free" {
			return
		}
	}
	c.Relocate = l.do(p.Orig, guest, via, "relocate", base+"/relocate", map[string]any{"hotel_id": p.Sister.ID})
}

func (l *load) snapshotWalks() []*walkChain {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*walkChain(nil), l.walks...)
}

// waitWalks waits until no arriving guest's stay is walking any more (the
// sagas settled, resumed where a step was lost) or within runs out, and
// returns how many are still walking.
func waitWalks(ctx context.Context, db *postgres.DB, within time.Duration) (int, time.Duration) {
	start := time.Now()
	for {
		var n int
		err := dbtest.SQL(db).QueryRow(ctx, `SELECT count(*) FROM reservations WHERE guest_id LIKE 'chaos-w-%' AND status = 'walking'`).Scan(&n)
		if (err == nil && n == 0) || time.Since(start) > within {
			return n, time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// walkAudit is what became of the arriving guests.
type walkAudit struct {
	Chains     int `json:"chains"`
	Arrived    int `json:"arrived"` // held and confirmed
	CheckedIn  int `json:"checked_in"`
	NoRoom     int `json:"no_room_free"`
	Upgraded   int `json:"upgraded"`
	Relocating int `json:"relocations"` // relocate answered 202
	Walked     int `json:"walked"`      // original walked, the sister's stay confirmed
	Undone     int `json:"undone"`      // the sister was full: original confirmed again
	// DuringFaults: relocations the desk asked for while a fault was on.
	DuringFaults int `json:"relocations_during_faults"`
	// Failures.
	NotOneLive int `json:"not_one_live"` // a guest with no live stay, or two
	Stuck      int `json:"stuck"`        // still walking after the settle
	BadWalk    int `json:"bad_walk"`     // walked without exactly one linked stay, undone with one, outcomes ≠ 1
	BadEvents  int `json:"bad_events"`   // a step's event missing or written twice
	SettledIn  string
	Examples   []string
}

// liveStatuses hold a guest's room for the night.
var liveStatuses = map[string]bool{"held": true, "confirmed": true, "checked_in": true, "walking": true}

// auditWalks checks every arriving guest against the database: exactly one
// live stay; every relocation either walked (the sister's one confirmed
// stay links to it, one held outcome) or undone (the original confirmed
// again, no stay at the sister, one refused outcome), never walking; and
// each state change of the saga written once to the outbox — the stream
// audit then proves each outbox event is in the stream exactly once.
func auditWalks(ctx context.Context, db *postgres.DB, chains []*walkChain) (walkAudit, error) {
	a := walkAudit{Chains: len(chains)}
	type stay struct{ id, hotel, status, from string }
	rows, err := dbtest.SQL(db).Query(ctx, `SELECT guest_id, reservation_id::TEXT, hotel_id::TEXT, status,
		COALESCE(relocated_from_reservation_id::TEXT, '') FROM reservations WHERE guest_id LIKE 'chaos-w-%'`)
	if err != nil {
		return a, fmt.Errorf("read stays: %w", err)
	}
	byGuest := map[string][]stay{}
	for rows.Next() {
		var g string
		var st stay
		if err := rows.Scan(&g, &st.id, &st.hotel, &st.status, &st.from); err != nil {
			rows.Close()
			return a, err
		}
		byGuest[g] = append(byGuest[g], st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return a, err
	}
	// Each saga event per aggregate (the original, or the walk id for the
	// sister's stay), and each walk's recorded outcomes.
	events := map[string]int{}
	rows, err = dbtest.SQL(db).Query(ctx, `SELECT aggregate_id::TEXT, event_type, count(*) FROM outbox
		WHERE event_type IN ('reservation.walking', 'reservation.walked', 'reservation.walk_undone', 'reservation.relocated')
		GROUP BY aggregate_id, event_type`)
	if err != nil {
		return a, fmt.Errorf("read saga events: %w", err)
	}
	for rows.Next() {
		var id, typ string
		var n int
		if err := rows.Scan(&id, &typ, &n); err != nil {
			rows.Close()
			return a, err
		}
		events[id+" "+typ] = n
	}
	rows.Close()
	outcomes := map[string]int{}
	rows, err = dbtest.SQL(db).Query(ctx, `SELECT walk_id::TEXT, count(*) FROM walk_outcomes GROUP BY walk_id`)
	if err != nil {
		return a, fmt.Errorf("read walk outcomes: %w", err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return a, err
		}
		outcomes[id] = n
	}
	rows.Close()

	example := func(format string, args ...any) {
		if len(a.Examples) < 10 {
			a.Examples = append(a.Examples, fmt.Sprintf(format, args...))
		}
	}
	for _, c := range chains {
		if c.Hold.Final != outOK {
			continue
		}
		guest := c.Hold.Guest
		stays := byGuest[guest]
		live := 0
		var orig *stay
		var relocated []stay
		for i := range stays {
			st := stays[i]
			if liveStatuses[st.status] {
				live++
			}
			switch {
			case st.id == c.Hold.ResID:
				orig = &stays[i]
			case st.from == c.Hold.ResID:
				relocated = append(relocated, st)
			}
		}
		if c.Confirm != nil && c.Confirm.Final == outOK {
			a.Arrived++
		}
		if live != 1 {
			a.NotOneLive++
			example("guest %s has %d live stays: %v", guest, live, stays)
		}
		if orig == nil {
			a.NotOneLive++
			example("guest %s: the stay %s answered 201 is gone", guest, c.Hold.ResID)
			continue
		}
		switch {
		case c.CheckIn != nil && c.CheckIn.Final == outOK:
			a.CheckedIn++
		case c.CheckIn != nil && c.CheckIn.Code == "no_room_free":
			a.NoRoom++
		}
		if c.Upgrade != nil && c.Upgrade.Final == outOK {
			a.Upgraded++
		}
		walkedEv := events[orig.id+" reservation.walked"]
		undoneEv := events[orig.id+" reservation.walk_undone"]
		walkingEv := events[orig.id+" reservation.walking"]
		if c.Relocate == nil || c.Relocate.Final == outRejected || c.Relocate.Final == outFailed {
			// No walk began: nothing of the saga may exist.
			if walkingEv+walkedEv+undoneEv > 0 || len(relocated) > 0 || orig.status == "walking" || orig.status == "walked" {
				a.BadWalk++
				example("guest %s was never relocated, yet the stay is %s with %d relocated stays and walking/walked/undone events %d/%d/%d",
					guest, orig.status, len(relocated), walkingEv, walkedEv, undoneEv)
			}
			continue
		}
		if c.Relocate.Final == outOK {
			a.Relocating++
		}
		walkID := c.Relocate.WalkID
		switch orig.status {
		case "walking":
			a.Stuck++
			example("guest %s: stay %s still walking (walk %s)", guest, orig.id, walkID)
		case "walked":
			a.Walked++
			ok := len(relocated) == 1 && relocated[0].status == "confirmed" && relocated[0].hotel == c.Pair.Sister.ID &&
				(walkID == "" || relocated[0].id == walkID) && outcomes[relocated[0].id] == 1
			if !ok {
				a.BadWalk++
				example("guest %s: stay %s walked, relocated stays %v, outcomes %d", guest, orig.id, relocated, outcomes[walkID])
			}
			if len(relocated) == 1 && (walkingEv != 1 || walkedEv != 1 || undoneEv != 0 || events[relocated[0].id+" reservation.relocated"] != 1) {
				a.BadEvents++
				example("guest %s walked: walking/walked/undone/relocated events %d/%d/%d/%d; want 1/1/0/1", guest, walkingEv, walkedEv,
					undoneEv, events[relocated[0].id+" reservation.relocated"])
			}
		case "confirmed":
			// Undone (or, for a relocation whose answer never came, never
			// begun: then no event at all).
			if walkingEv > 0 {
				a.Undone++
				if walkingEv != 1 || undoneEv != 1 || walkedEv != 0 || (walkID != "" && outcomes[walkID] != 1) {
					a.BadEvents++
					example("guest %s undone: walking/walked/undone events %d/%d/%d, outcomes %d; want 1/0/1, 1", guest, walkingEv,
						walkedEv, undoneEv, outcomes[walkID])
				}
			} else if c.Relocate.Final == outOK {
				a.BadWalk++
				example("guest %s: relocation answered 202 but no walk event exists", guest)
			}
			if len(relocated) > 0 {
				a.BadWalk++
				example("guest %s: original confirmed again, yet %d relocated stays exist", guest, len(relocated))
			}
		default:
			a.BadWalk++
			example("guest %s: relocated stay %s is %s", guest, orig.id, orig.status)
		}
	}
	return a, nil
}

// addWalkChecks folds the walk audit into the report's checks.
func (rep *report) addWalkChecks(add func(string, bool, string), info func(string, string), a walkAudit, stuck int) {
	add("walks settle (none left walking)", stuck == 0 && a.Stuck == 0,
		fmt.Sprintf("%d still walking after %s (BERTH_WALK_RESUME_AFTER=%s)", max(stuck, a.Stuck), a.SettledIn, walkResumeAfter))
	add("every arriving guest has exactly one live stay", a.NotOneLive == 0,
		fmt.Sprintf("%d guests without exactly one %s", a.NotOneLive, strings.Join(first(a.Examples, 5), "; ")))
	add("every relocation walked with one linked stay or was undone with none", a.BadWalk == 0,
		fmt.Sprintf("%d relocations: %d walked, %d undone; %d wrong", a.Relocating, a.Walked, a.Undone, a.BadWalk))
	add("each step of a walk written once", a.BadEvents == 0, fmt.Sprintf("%d walks with a step's event missing or twice", a.BadEvents))
	info("arrivals", fmt.Sprintf("%d arrival chains, %d confirmed, %d checked in, %d found no room, %d upgraded, %d relocated (%d walked, %d undone; %d asked while a fault was on)",
		a.Chains, a.Arrived, a.CheckedIn, a.NoRoom, a.Upgraded, a.Relocating, a.Walked, a.Undone, a.DuringFaults))
	if a.Relocating == 0 || a.Walked == 0 {
		add("walks happened during the faults", false, fmt.Sprintf("%d relocations, %d walked: the run did not exercise the saga", a.Relocating, a.Walked))
	}
}
