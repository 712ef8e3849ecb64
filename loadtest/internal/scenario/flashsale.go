package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/google/uuid"
)

// FlashSale is N clients racing for the last K rooms of one hotel.
type FlashSale struct {
	Clients int    // N
	Rooms   int    // K
	Region  string // home region of the hotel ("" = first)
	Load    Load   // Rate and Workers; MaxIterations is Clients
	// Settle: how long the sale waits, once its hotel's setup has been
	// relayed, before it opens (openAfterSetup); 0 opens it the moment the
	// setup returns.
	Settle time.Duration
	// Connected: every client is on the sale's page when the sale opens,
	// having loaded the room's availability over a kept-alive connection
	// that its Book then re-uses, as a browser re-uses the page's. Without
	// it the sale's first requests also open the generator's connections.
	Connected bool
}

// RunFlashSale seeds one hotel with K rooms on one night, lets N clients
// hold one room each through every region's entry point (round-robin), and
// checks that exactly min(N, K) won.
func (e *Env) RunFlashSale(ctx context.Context, o FlashSale) (*report.Report, error) {
	if o.Region == "" {
		o.Region = e.Client.Targets.Regions[0]
	}
	o.Load.MaxIterations = int64(o.Clients)
	if o.Load.Duration == 0 {
		o.Load.Duration = time.Minute
	}
	cfg := o.Load.config()
	cfg["clients"], cfg["rooms"], cfg["home_region"] = o.Clients, o.Rooms, o.Region
	r := e.newReport("flash-sale", cfg)
	night := day(45)
	h, err := e.CreateHotel(ctx, 0, o.Region, 1, o.Rooms, night, day(46))
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	e.logf("flash-sale: hotel %s (%s), %d room(s) on %s, %d clients at %.0f/s via %v",
		h.ID, o.Region, o.Rooms, night, o.Clients, o.Load.Rate, e.Client.Targets.Regions)
	ledger := audit.NewLedger()
	ledger.Touch("hotel", h.ID)
	rec := engine.NewRecorder()
	var won atomic.Int64
	// When each request was due and answered, for the phase figures below.
	times := make([]saleTimes, o.Clients)
	regions := e.Client.Targets.Regions
	// Every client is signed in with its request ready before the sale
	// opens, as on a real sale's page: the generator's CPU during the sale
	// (it shares the machine with the platform) goes to sending, not to
	// minting tokens and encoding bodies.
	type ready struct {
		guest, token string
		body         []byte
	}
	clients := make([]ready, o.Clients)
	for i := range clients {
		guest := fmt.Sprintf("fs-%d-%s", i, uuid.NewString()[:8])
		body, err := json.Marshal(holdBody(guest, h.RoomTypes[0], night, day(46), 1))
		if err != nil {
			return nil, fmt.Errorf("encode a hold: %w", err)
		}
		clients[i] = ready{guest: guest, token: e.Client.Guest(guest), body: body}
	}
	if err := e.openAfterSetup(ctx, r, "", o.Settle, h.ID); err != nil {
		return nil, err
	}
	if o.Connected {
		start := time.Now()
		page := "/v1/hotels/" + h.ID + "/availability?check_in=" + night + "&check_out=" + day(46) + "&room_type_id=" + h.RoomTypes[0]
		if err := e.connectClients(ctx, page, o.Clients, o.Load.Workers); err != nil {
			return nil, fmt.Errorf("the sale's page: %w", err)
		}
		r.Figures["sale_page_ms"] = float64(time.Since(start).Microseconds()) / 1000
	}
	dials := e.Client.Dials()
	e.accountCPU(ctx, r, e.cpuMeter(e.CPUProcs, e.CPUPostgres), "hold", func() int64 {
		return e.drive(ctx, r, o.Load, rec, func() string { return fmt.Sprintf("won %d/%d", won.Load(), o.Rooms) },
			func(ctx context.Context, s *engine.Session) {
				c := clients[int(s.Index)%len(clients)]
				guest := c.guest
				i := int(s.Index) % len(times)
				times[i].due = s.Intended
				defer func() { times[i].answered = time.Now() }()
				s.MeasureAs(func() (string, string) {
					resp, err := e.Client.Do(ctx, client.Request{Region: regions[int(s.Index)%len(regions)], Method: http.MethodPost,
						Path: "/v1/hotels/" + h.ID + "/reservations", Token: c.token, IdemKey: uuid.NewString(),
						Body: c.body})
					out := client.Outcome(resp, err)
					if err == nil && resp.Status == http.StatusCreated {
						var res struct {
							ID string `json:"reservation_id"`
						}
						if resp.Decode(&res) == nil {
							ledger.Add(audit.Created{Kind: "hotel", PartitionID: h.ID, ID: res.ID, Status: "held"}, guest)
						}
						won.Add(1)
						times[i].won = true
						return "hold_won", out
					}
					return "hold_lost", out
				})
			}).Completed
	})
	r.Figures["sale_dials"] = float64(e.Client.Dials() - dials)
	want := min(o.Clients, o.Rooms)
	for k, v := range salePhases(times) {
		r.Figures[k] = v
	}
	r.Figures["winners"] = float64(won.Load())
	r.Figures["rooms"] = float64(o.Rooms)
	r.Checks = append(r.Checks, report.Check{Name: "exactly min(N, K) winners", OK: won.Load() == int64(want),
		Detail: fmt.Sprintf("%d client(s) got 201 for %d room(s) among %d clients", won.Load(), o.Rooms, o.Clients)})
	lost := r.Ops["hold_lost"]
	var soldOut int64 = lost.Outcomes["sold_out"]
	r.Checks = append(r.Checks, report.Check{Name: "every loser answered 409 sold_out", OK: soldOut == lost.Count,
		Detail: fmt.Sprintf("%d of %d losers got sold_out; others: %v", soldOut, lost.Count, lost.Outcomes)})
	e.finish(ctx, r, ledger)
	return r, nil
}

// saleTimes is one client's request: when it was due, when its answer came.
type saleTimes struct {
	due, answered time.Time
	won           bool
}

// salePhases splits the losers at the moment the last winner was answered:
// the early ones were due before it (the home service could not know the
// room type sold out yet, so they went to the database, queued behind the
// winning transaction), the late ones after (refused from the sold-out
// cache). Their p99s show which phase sets the sale's tail;
// last_win_answered_ms is when, from the first request's due time.
func salePhases(times []saleTimes) map[string]float64 {
	var first, lastWin time.Time
	for _, t := range times {
		if t.due.IsZero() {
			continue
		}
		if first.IsZero() || t.due.Before(first) {
			first = t.due
		}
		if t.won && t.answered.After(lastWin) {
			lastWin = t.answered
		}
	}
	if first.IsZero() || lastWin.IsZero() {
		return nil
	}
	var early, late []float64
	for _, t := range times {
		if t.due.IsZero() || t.won {
			continue
		}
		ms := float64(t.answered.Sub(t.due)) / float64(time.Millisecond)
		if t.due.Before(lastWin) {
			early = append(early, ms)
		} else {
			late = append(late, ms)
		}
	}
	return map[string]float64{
		"last_win_answered_ms": float64(lastWin.Sub(first)) / float64(time.Millisecond),
		"losers_early":         float64(len(early)),
		"losers_early_p99_ms":  p99(early),
		"losers_late":          float64(len(late)),
		"losers_late_p99_ms":   p99(late),
	}
}

// p99 is the nearest-rank 99th percentile of xs (0 when empty).
func p99(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return xs[(len(xs)*99+99)/100-1]
}
