package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/berthhq/berth/loadtest/internal/seed"
	"github.com/google/uuid"
)

// Baseline runs the same hold on spread inventory twice: as raw SQL against
// the database (the booking service's transaction, statement for
// statement), then through the HTTP API, and reports the ratios.
type Baseline struct {
	Hotels, RoomTypes, Nights int
	Mode                      string // both, sql, http
	Load                      Load
}

// sqlHold is one hold as the booking service runs it, statement for
// statement: the store's own winning hold (postgres.HoldScript, which
// TestHoldScriptIsWhatTheStoreRuns ties to Store.Hold) replayed on the
// store's connection pool, READ COMMITTED. The inventory is seeded so that
// it never sells out, so any error is an error.
func sqlHold(ctx context.Context, e *Env, h seed.Hotel, rt string, in time.Time, guest string) (string, error) {
	day := reservation.DateOf(in)
	req := reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: rt, GuestID: guest,
		Stay: reservation.Stay{CheckIn: day, CheckOut: day.AddDays(1)}, Quantity: 1}
	sc, v := postgres.HoldScript(req, h.Region, 10*time.Minute, uuid.NewString(), "baseline")
	if err := e.Store.RunScript(ctx, sc, v); err != nil {
		return "", err
	}
	return req.ReservationID, nil
}

// RunBaseline seeds spread inventory with COPY and measures both paths.
func (e *Env) RunBaseline(ctx context.Context, o Baseline) (*report.Report, error) {
	cfg := o.Load.config()
	cfg["hotels"], cfg["room_types"], cfg["nights"], cfg["mode"] = o.Hotels, o.RoomTypes, o.Nights, o.Mode
	r := e.newReport("baseline", cfg)
	if e.DB == nil {
		return nil, fmt.Errorf("baseline needs the database (--db)")
	}
	regions := []string{"us-east", "eu-west", "ap-south"}
	if e.Client != nil {
		regions = e.Client.Targets.Regions
	}
	cat, err := seed.Hotels(ctx, e.DB, seed.Options{Hotels: o.Hotels, RoomTypes: o.RoomTypes, Nights: o.Nights, Rooms: 100000,
		Regions: regions, Workers: 2, KeepIDs: true, StartDay: 7})
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	e.logf("baseline: seeded %d hotels × %d room types × %d nights (100,000 rooms each: spread, never sold out)", o.Hotels, o.RoomTypes, o.Nights)
	first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 7)
	ledger := audit.NewLedger()
	rec := engine.NewRecorder()
	var elapsed = map[string]time.Duration{}
	run := func(op string, hold func(ctx context.Context, h seed.Hotel, rt string, in time.Time, guest string) (string, string)) {
		e.logf("baseline: %s …", op)
		res := engine.Run(ctx, engine.Config{Rate: o.Load.Rate, Duration: o.Load.Duration, Workers: o.Load.Workers, Progress: progressOf(e)}, rec,
			func(ctx context.Context, s *engine.Session) {
				h := cat.Hotels[rand.IntN(len(cat.Hotels))]
				rt := h.RoomTypes[rand.IntN(len(h.RoomTypes))]
				in := first.AddDate(0, 0, rand.IntN(o.Nights))
				guest := "base-" + uuid.NewString()[:12]
				s.Measure(op, func() string {
					id, out := hold(ctx, h, rt, in, guest)
					if id != "" {
						ledger.Add(audit.Created{Kind: "hotel", PartitionID: h.ID, ID: id, Status: "held"}, guest)
					}
					return out
				})
			})
		elapsed[op] = res.Elapsed
		r.Engine = res
	}
	for _, h := range cat.Hotels {
		ledger.Touch("hotel", h.ID)
	}
	if o.Mode != "http" {
		run("hold_sql", func(ctx context.Context, h seed.Hotel, rt string, in time.Time, guest string) (string, string) {
			id, err := sqlHold(ctx, e, h, rt, in, guest)
			if err != nil {
				return "", "sql_error"
			}
			return id, "ok"
		})
	}
	if o.Mode == "both" {
		e.settle(ctx)
	}
	if o.Mode != "sql" && e.Client != nil {
		run("hold_http", func(ctx context.Context, h seed.Hotel, rt string, in time.Time, guest string) (string, string) {
			resp, err := e.Client.Do(ctx, client.Request{Region: h.Region, Method: http.MethodPost, Path: "/v1/hotels/" + h.ID + "/reservations",
				Token: e.Client.Guest(guest), IdemKey: uuid.NewString(),
				Body: holdBody(guest, rt, in.Format(time.DateOnly), in.AddDate(0, 0, 1).Format(time.DateOnly), 1)})
			var res struct {
				ID string `json:"reservation_id"`
			}
			if err == nil && resp.Status == http.StatusCreated {
				_ = resp.Decode(&res)
			}
			return res.ID, client.Outcome(resp, err)
		})
	}
	r.Ops = map[string]engine.OpStats{}
	for op, el := range elapsed {
		r.Ops[op] = rec.Ops(el)[op]
	}
	r.Timeline = rec.Timeline()
	if s, h := r.Ops["hold_sql"], r.Ops["hold_http"]; s.Count > 0 && h.Count > 0 {
		r.Figures["throughput_ratio_http_to_sql"] = h.Throughput / s.Throughput
		r.Figures["p99_ratio_http_to_sql"] = h.P99Ms / s.P99Ms
		r.Figures["p50_ratio_http_to_sql"] = h.P50Ms / s.P50Ms
	}
	e.finish(ctx, r, ledger)
	return r, nil
}

func progressOf(e *Env) ioWriter {
	if e.Quiet {
		return nil
	}
	return e.Log
}

// settle waits, between the two phases, until the events of the first one
// are relayed and consumed (bounded to a minute): otherwise the second phase
// shares the machine with the first phase's relaying, projection and
// notifications, and the ratio measures that, not the two paths.
func (e *Env) settle(ctx context.Context) {
	if e.DB == nil {
		return
	}
	start := time.Now()
	deadline := start.Add(time.Minute)
	var unsent int64
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err := e.DB.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil || unsent == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Consumers trail the relay by moments; give them those.
	time.Sleep(3 * time.Second)
	e.logf("baseline: settled after %s (%d events still unsent)", time.Since(start).Round(100*time.Millisecond), unsent)
}
