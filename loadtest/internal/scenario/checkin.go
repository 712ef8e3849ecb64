package scenario

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/google/uuid"
)

// CheckInMorning is a hotel's check-in morning under overbooking: more
// confirmed arrivals than rooms, so the desk walks guests (docs/adr/0012-walks.md).
type CheckInMorning struct {
	Arrivals       int    // confirmed arrivals today (200)
	OverbookingPct int    // the room type's overbooking (10): arrivals = rooms × (100 + pct) / 100
	Region         string // home region of the hotels ("" = first)
	Load           Load   // Rate and Workers; MaxIterations is Arrivals
	// SettleWait bounds the wait for the relocations to settle (the
	// booking services' saga consumers run them; 60s).
	SettleWait time.Duration
	// Settle, when set, runs the relocation saga itself while waiting (a
	// test's booking server has no broker: bookingtest.PumpWalks).
	Settle func(ctx context.Context) error
}

// RunCheckInMorning seeds a hotel of a chain whose standard rooms are sold
// with an overbooking limit (every sellable room confirmed for today), a
// few suites, and a sister hotel of the chain in the same city; then the
// desks check the arrivals in, in parallel. When the standard rooms run
// out, a desk walks the guest with the refusal's options: an upgrade
// first, a relocation to the sister hotel second. It reports check-ins per
// second and each step's latency, the walks by kind, and the audit
// (postgres.Verify: rooms never assigned twice, walked stays released and
// linked).
func (e *Env) RunCheckInMorning(ctx context.Context, o CheckInMorning) (*report.Report, error) {
	if o.Region == "" {
		o.Region = e.Client.Targets.Regions[0]
	}
	if o.Arrivals <= 0 {
		o.Arrivals = 200
	}
	if o.SettleWait <= 0 {
		o.SettleWait = time.Minute
	}
	rooms := o.Arrivals * 100 / (100 + o.OverbookingPct)
	for rooms*(100+o.OverbookingPct)/100 < o.Arrivals {
		rooms++
	}
	suites := max(1, rooms/20)
	o.Load.MaxIterations = int64(o.Arrivals)
	if o.Load.Duration == 0 {
		o.Load.Duration = 5 * time.Minute
	}
	cfg := o.Load.config()
	cfg["arrivals"], cfg["overbooking_pct"], cfg["rooms"], cfg["suites"], cfg["home_region"] = o.Arrivals, o.OverbookingPct, rooms, suites, o.Region
	r := e.newReport("check-in-morning", cfg)
	seedStart := time.Now()
	s, err := e.seedMorning(ctx, o, rooms, suites)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	e.logf("check-in-morning: hotel %s, %d rooms (+%d %% sold), %d suites, sister %s; %d arrivals seeded in %s",
		s.hotel, rooms, o.OverbookingPct, suites, s.sister, o.Arrivals, time.Since(seedStart).Round(time.Millisecond))
	ledger := audit.NewLedger()
	ledger.Touch("hotel", s.hotel)
	ledger.Touch("hotel", s.sister)
	rec := engine.NewRecorder()
	var checkedIn, upgraded, relocating, stranded atomic.Int64
	admin := e.Client.Admin()
	res := e.drive(ctx, r, o.Load, rec, func() string {
		return fmt.Sprintf("in %d, upgraded %d, relocating %d", checkedIn.Load(), upgraded.Load(), relocating.Load())
	}, func(ctx context.Context, ss *engine.Session) {
		path := "/v1/hotels/" + s.hotel + "/reservations/" + s.stays[ss.Index]
		var opts struct {
			Options struct {
				Upgrades []struct {
					RoomTypeID string `json:"room_type_id"`
				} `json:"upgrades"`
				Relocations []struct {
					HotelID    string `json:"hotel_id"`
					RoomTypeID string `json:"room_type_id"`
				} `json:"relocations"`
			} `json:"options"`
		}
		var refused bool
		ss.MeasureAs(func() (string, string) {
			resp, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: path + "/check-in",
				Token: admin, IdemKey: uuid.NewString()})
			out := client.Outcome(resp, err)
			switch {
			case err == nil && resp.Status == http.StatusOK:
				checkedIn.Add(1)
			case err == nil && resp.Code() == "no_room_free":
				refused = resp.Decode(&opts) == nil
			}
			return "check_in", out
		})
		if !refused {
			return
		}
		for _, u := range opts.Options.Upgrades {
			ok := false
			ss.MeasureAs(func() (string, string) {
				resp, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: path + "/upgrade",
					Token: admin, IdemKey: uuid.NewString(), Body: map[string]any{"room_type_id": u.RoomTypeID}})
				ok = err == nil && resp.Status == http.StatusOK
				return "upgrade", client.Outcome(resp, err)
			})
			if ok {
				upgraded.Add(1)
				return
			}
		}
		for _, rl := range opts.Options.Relocations {
			ok := false
			ss.MeasureAs(func() (string, string) {
				resp, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: path + "/relocate",
					Token: admin, IdemKey: uuid.NewString(), Body: map[string]any{"hotel_id": rl.HotelID, "room_type_id": rl.RoomTypeID}})
				ok = err == nil && resp.Status == http.StatusAccepted
				return "relocate", client.Outcome(resp, err)
			})
			if ok {
				relocating.Add(1)
				return
			}
		}
		stranded.Add(1)
	})
	// The relocations finish asynchronously (the saga): wait for them.
	settled := time.Now()
	var walked, undone, walking int
	deadline := time.Now().Add(o.SettleWait)
	for {
		if o.Settle != nil {
			if err := o.Settle(ctx); err != nil {
				r.Notes = append(r.Notes, "settling the walks: "+err.Error())
			}
		}
		err := e.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'walked'), count(*) FILTER (WHERE status = 'walking'),
				count(*) FILTER (WHERE status = 'confirmed')
			FROM reservations WHERE hotel_id = $1`, s.hotel).Scan(&walked, &walking, &undone)
		if err != nil {
			return nil, fmt.Errorf("count walks: %w", err)
		}
		if walking == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	settle := time.Since(settled)
	secs := res.Elapsed.Seconds()
	r.Figures["arrivals"] = float64(o.Arrivals)
	r.Figures["checked_in"] = float64(checkedIn.Load())
	r.Figures["check_ins_per_s"] = float64(checkedIn.Load()+upgraded.Load()) / max(secs, 1e-9)
	r.Figures["walks_upgrade"] = float64(upgraded.Load())
	r.Figures["walks_relocation_requested"] = float64(relocating.Load())
	r.Figures["walks_relocated"] = float64(walked)
	r.Figures["walks_undone"] = float64(undone)
	r.Figures["walks_still_walking"] = float64(walking)
	r.Figures["stranded"] = float64(stranded.Load())
	r.Figures["relocations_settle_s"] = settle.Seconds()
	accounted := checkedIn.Load() + upgraded.Load() + int64(walked)
	r.Checks = append(r.Checks,
		report.Check{Name: "every arrival has a room: checked in, upgraded or relocated", OK: accounted == int64(o.Arrivals) && stranded.Load() == 0,
			Detail: fmt.Sprintf("%d checked in + %d upgraded + %d relocated of %d arrivals; %d stranded, %d walks undone",
				checkedIn.Load(), upgraded.Load(), walked, o.Arrivals, stranded.Load(), undone)},
		report.Check{Name: "every relocation settled", OK: walking == 0,
			Detail: fmt.Sprintf("%d still walking after %s", walking, settle.Round(time.Millisecond))},
		report.Check{Name: "the rooms ran out before the walks began", OK: checkedIn.Load() == int64(rooms),
			Detail: fmt.Sprintf("%d checked in for %d rooms", checkedIn.Load(), rooms)})
	e.finish(ctx, r, ledger)
	return r, nil
}

type morning struct {
	hotel, sister string
	stays         []string
}

// seedMorning creates the two hotels of a chain (UTC, so today is today
// for the desk), the rooms and the confirmed arrivals, through the API.
func (e *Env) seedMorning(ctx context.Context, o CheckInMorning, rooms, suites int) (morning, error) {
	var m morning
	admin := e.Client.Admin()
	chain := "Loadtest chain " + uuid.NewString()[:8]
	hotel := func(name string) (string, error) {
		r, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: "/v1/hotels", Token: admin,
			Body: map[string]any{"name": name, "city": "Lisbon", "country": "PT", "timezone": "UTC", "home_region": o.Region, "chain": chain}})
		if err := expect(r, err, http.StatusCreated, "create hotel"); err != nil {
			return "", err
		}
		var h struct {
			ID string `json:"hotel_id"`
		}
		return h.ID, r.Decode(&h)
	}
	roomType := func(hotelID, name string, maxGuests, total, pct int) (string, error) {
		r, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: "/v1/hotels/" + hotelID + "/room-types",
			Token: admin, Body: map[string]any{"name": name, "max_guests": maxGuests, "price_cents": 10000, "currency": "EUR", "overbooking_pct": pct}})
		if err := expect(r, err, http.StatusCreated, "create room type"); err != nil {
			return "", err
		}
		var rt struct {
			ID string `json:"room_type_id"`
		}
		if err := r.Decode(&rt); err != nil {
			return "", err
		}
		r, err = e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPut, Path: "/v1/hotels/" + hotelID + "/room-types/" + rt.ID + "/inventory",
			Token: admin, Body: map[string]any{"from": day(-1), "to": day(3), "total_rooms": total}})
		return rt.ID, expect(r, err, http.StatusOK, "set inventory")
	}
	addRooms := func(hotelID, typeID, prefix string, n int) error {
		for i := range n {
			r, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: "/v1/hotels/" + hotelID + "/rooms", Token: admin,
				Body: map[string]any{"room_type_id": typeID, "number": fmt.Sprintf("%s%04d", prefix, i+1), "floor": 1 + i/50}})
			if err := expect(r, err, http.StatusCreated, "create room"); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if m.hotel, err = hotel("Loadtest Morning Hotel"); err != nil {
		return m, err
	}
	standard, err := roomType(m.hotel, "Standard", 2, rooms, o.OverbookingPct)
	if err != nil {
		return m, err
	}
	suite, err := roomType(m.hotel, "Suite", 3, suites, 0)
	if err != nil {
		return m, err
	}
	if err := addRooms(m.hotel, standard, "S", rooms); err != nil {
		return m, err
	}
	if err := addRooms(m.hotel, suite, "X", suites); err != nil {
		return m, err
	}
	if m.sister, err = hotel("Loadtest Sister Hotel"); err != nil {
		return m, err
	}
	if _, err := roomType(m.sister, "Double", 2, o.Arrivals, 0); err != nil {
		return m, err
	}
	for i := range o.Arrivals {
		guest := fmt.Sprintf("cm-%d-%s", i, uuid.NewString()[:8])
		r, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: "/v1/hotels/" + m.hotel + "/reservations",
			Token: admin, IdemKey: uuid.NewString(), Body: holdBody(guest, standard, day(0), day(2), 1)})
		if err := expect(r, err, http.StatusCreated, "hold"); err != nil {
			return m, err
		}
		var res struct {
			ID string `json:"reservation_id"`
		}
		if err := r.Decode(&res); err != nil {
			return m, err
		}
		r, err = e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: "/v1/hotels/" + m.hotel + "/reservations/" + res.ID + "/confirm",
			Token: admin, IdemKey: uuid.NewString(), Body: map[string]any{"payment_ref": "desk-" + guest}})
		if err := expect(r, err, http.StatusOK, "confirm"); err != nil {
			return m, err
		}
		m.stays = append(m.stays, res.ID)
	}
	return m, nil
}
