package scenario

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/wan"
	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/google/uuid"
)

// OriginFollow shows placement following the writes: a hotel homed in Home
// whose guests book from Guests, and a control hotel booked from its own
// home. Phase one measures the holds; then the balancer runs (Balance, a
// command line: `router shards balance --by-origin …`); phase two measures
// the same holds again. The abroad hotel should have moved to Guests and
// its holds should be about one Guests↔Home round trip faster; the control
// hotel should not have moved.
type OriginFollow struct {
	Home, Guests string
	Phase        time.Duration
	Balance      string
	Load         Load
}

// RunOriginFollow runs the two phases around the balancer.
func (e *Env) RunOriginFollow(ctx context.Context, o OriginFollow) (*report.Report, error) {
	cfg := o.Load.config()
	cfg["home"], cfg["guests"], cfg["phase"], cfg["balance"] = o.Home, o.Guests, o.Phase.String(), o.Balance
	if o.Home == o.Guests || o.Phase <= 0 {
		return nil, fmt.Errorf("origin-follow: want --home and --guests to differ and a positive --phase")
	}
	for _, reg := range []string{o.Home, o.Guests} {
		if e.Client.Targets.Kind[reg] != "router" {
			return e.skipped("origin-follow", cfg, "region "+reg+" has no router answering"), nil
		}
	}
	if e.DB == nil {
		return nil, fmt.Errorf("origin-follow reads the placements from the database: set BERTH_DATABASE_URL or --db")
	}
	r := e.newReport("origin-follow", cfg)
	abroad, err := e.CreateHotel(ctx, 0, o.Home, 1, 5000, day(7), day(37))
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	control, err := e.CreateHotel(ctx, 1, o.Home, 1, 5000, day(7), day(37))
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	ledger := audit.NewLedger()
	ledger.Touch("hotel", abroad.ID)
	ledger.Touch("hotel", control.ID)
	rec := engine.NewRecorder()
	phase := "before"
	// Half the arrivals are guests abroad booking the abroad hotel, half
	// are local guests of the control hotel.
	task := func(ctx context.Context, s *engine.Session) {
		h, via, who := abroad, o.Guests, "abroad"
		if s.Index%2 == 1 {
			h, via, who = control, o.Home, "control"
		}
		guest := "follow-" + uuid.NewString()[:12]
		in := 7 + int(s.Index%25)
		s.Measure("hold "+who+" "+phase, func() string {
			resp, err := e.Client.Do(ctx, client.Request{Region: via, Method: http.MethodPost,
				Path: "/v1/hotels/" + h.ID + "/reservations", Token: e.Client.Guest(guest), IdemKey: uuid.NewString(),
				Body: holdBody(guest, h.RoomTypes[0], day(in), day(in+1), 1)})
			if err == nil && resp.Status == http.StatusCreated {
				var res struct {
					ID string `json:"reservation_id"`
				}
				if resp.Decode(&res) == nil {
					ledger.Add(audit.Created{Kind: "hotel", PartitionID: h.ID, ID: res.ID, Status: "held"}, guest)
				}
			}
			return client.Outcome(resp, err)
		})
	}
	l := o.Load
	l.Duration = o.Phase
	first := e.drive(ctx, r, l, rec, nil, task)

	e.logf("origin-follow: running %q", o.Balance)
	words := strings.Fields(o.Balance)
	if len(words) == 0 {
		return nil, fmt.Errorf("--balance: a command is required")
	}
	out, err := exec.CommandContext(ctx, words[0], words[1:]...).CombinedOutput()
	r.Notes = append(r.Notes, "balancer output:\n"+strings.TrimSpace(string(out)))
	if err != nil {
		r.Checks = append(r.Checks, report.Check{Name: "the balancer ran", OK: false, Detail: fmt.Sprintf("%s: %v", o.Balance, err)})
	}
	homeOf := func(id string) string {
		var h string
		if err := e.DB.QueryRow(ctx, `SELECT home_region FROM placements WHERE kind = 'hotel' AND partition_id = $1`, id).Scan(&h); err != nil {
			return "?" + err.Error()
		}
		return h
	}
	movedTo, controlAt := homeOf(abroad.ID), homeOf(control.ID)
	r.Checks = append(r.Checks,
		report.Check{Name: "the hotel booked from abroad moved to its guests' region", OK: movedTo == o.Guests,
			Detail: fmt.Sprintf("hotel %s: %s → %s", abroad.ID, o.Home, movedTo)},
		report.Check{Name: "the hotel booked from its home stayed", OK: controlAt == o.Home,
			Detail: fmt.Sprintf("hotel %s: homed in %s", control.ID, controlAt)})

	phase = "after"
	second := e.drive(ctx, r, l, rec, nil, task)
	r.Engine.Scheduled += first.Scheduled
	r.Engine.Completed += first.Completed
	r.Engine.Dropped += first.Dropped
	r.Engine.ElapsedS += first.ElapsedS
	r.Ops = rec.Ops(first.Elapsed + second.Elapsed)
	r.Timeline = rec.Timeline()

	before, after := r.Ops["hold abroad before"], r.Ops["hold abroad after"]
	if before.Count > 0 && after.Count > 0 {
		r.Figures["abroad_hold_p50_before_ms"], r.Figures["abroad_hold_p50_after_ms"] = before.P50Ms, after.P50Ms
		r.Figures["abroad_hold_p50_drop_ms"] = before.P50Ms - after.P50Ms
		if rtt, ok := wan.RTT(o.Guests, o.Home); ok && rtt > 0 {
			r.Figures["wan_rtt_ms"] = float64(rtt.Milliseconds())
			r.Figures["drop_over_rtt"] = (before.P50Ms - after.P50Ms) / float64(rtt.Milliseconds())
		}
	}
	e.finish(ctx, r, ledger)
	return r, nil
}
