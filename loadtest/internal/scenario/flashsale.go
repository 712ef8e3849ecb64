package scenario

import (
	"context"
	"encoding/json"
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

// FlashSale is N clients racing for the last K rooms of one hotel.
type FlashSale struct {
	Clients int    // N
	Rooms   int    // K
	Region  string // home region of the hotel ("" = first)
	Load    Load   // Rate and Workers; MaxIterations is Clients
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
	e.drive(ctx, r, o.Load, rec, func() string { return fmt.Sprintf("won %d/%d", won.Load(), o.Rooms) },
		func(ctx context.Context, s *engine.Session) {
			c := clients[int(s.Index)%len(clients)]
			guest := c.guest
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
					return "hold_won", out
				}
				return "hold_lost", out
			})
		})
	want := min(o.Clients, o.Rooms)
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
