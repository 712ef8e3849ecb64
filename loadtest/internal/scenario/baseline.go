package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/cpu"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/berthhq/berth/loadtest/internal/seed"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Baseline runs the same hold on spread inventory twice: as raw SQL against
// the database (the booking service's transaction, statement for
// statement), then through the HTTP API, and reports the ratios.
type Baseline struct {
	Hotels, RoomTypes, Nights int
	Mode                      string // both, sql, http
	// Entry is which region's router a hold enters through: "home" (the
	// hotel's own, as placement by origin aims for; the default) or
	// "other" (the next region's, so every hold crosses a region).
	Entry string
	// Hot adds a leg after the HTTP one (hold_http_hot): the same workers
	// hold one room type's same night, every hold on the same rows — what
	// hot-partition batching serves (ADR 0010) — and the report's
	// throughput_ratio_hot_to_spread compares it with the spread leg of
	// the same run.
	Hot  bool
	Load Load
	// CPUProcs are the processes whose CPU each leg accounts (with the
	// generator itself); CPUPostgres adds the PostgreSQL backends connected
	// to the database. Either turns the accounting on.
	CPUProcs    []cpu.Proc
	CPUPostgres bool
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

// entryRegion is the region whose router a hold for a hotel homed in home
// enters through: home itself, or with entry "other" the next of regions
// after it (home when it is the only one).
func entryRegion(regions []string, home, entry string) string {
	if entry != "other" {
		return home
	}
	for i, r := range regions {
		if r == home {
			return regions[(i+1)%len(regions)]
		}
	}
	return home
}

// RunBaseline seeds spread inventory with COPY and measures both paths.
func (e *Env) RunBaseline(ctx context.Context, o Baseline) (*report.Report, error) {
	cfg := o.Load.config()
	cfg["hotels"], cfg["room_types"], cfg["nights"], cfg["mode"] = o.Hotels, o.RoomTypes, o.Nights, o.Mode
	if o.Entry == "" {
		o.Entry = "home"
	}
	if o.Entry != "home" && o.Entry != "other" {
		return nil, fmt.Errorf("--entry %q: want home or other", o.Entry)
	}
	cfg["entry"] = o.Entry
	cfg["hot"] = o.Hot
	r := e.newReport("baseline", cfg)
	if e.DB == nil {
		return nil, fmt.Errorf("baseline needs the database (--db)")
	}
	regions := []string{"us-east", "eu-west", "ap-south"}
	if e.Client != nil {
		regions = e.Client.Targets.Regions
	}
	rooms := 100_000
	if o.Hot {
		rooms = 10_000_000 // the hot leg's one night never sells out either
	}
	cat, err := seed.Hotels(ctx, e.DB, seed.Options{Hotels: o.Hotels, RoomTypes: o.RoomTypes, Nights: o.Nights, Rooms: rooms,
		Regions: regions, Workers: 2, KeepIDs: true, StartDay: 7})
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	e.logf("baseline: seeded %d hotels × %d room types × %d nights (%d rooms each: never sold out)", o.Hotels, o.RoomTypes, o.Nights, rooms)
	first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 7)
	ledger := audit.NewLedger()
	rec := engine.NewRecorder()
	var elapsed = map[string]time.Duration{}
	// pick chooses a hold's room type and night: at random (spread), or the
	// first room type's first night (hot).
	pick := func() (seed.Hotel, string, time.Time) {
		h := cat.Hotels[rand.IntN(len(cat.Hotels))]
		return h, h.RoomTypes[rand.IntN(len(h.RoomTypes))], first.AddDate(0, 0, rand.IntN(o.Nights))
	}
	run := func(op string, hold func(ctx context.Context, h seed.Hotel, rt string, in time.Time, guest string) (string, string)) {
		e.logf("baseline: %s …", op)
		e.accountCPU(ctx, r, e.cpuMeter(o.CPUProcs, o.CPUPostgres), op, func() int64 {
			res := engine.Run(ctx, engine.Config{Rate: o.Load.Rate, Duration: o.Load.Duration, Workers: o.Load.Workers, Progress: progressOf(e)}, rec,
				func(ctx context.Context, s *engine.Session) {
					h, rt, in := pick()
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
			return res.Completed
		})
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
		holdHTTP := func(ctx context.Context, h seed.Hotel, rt string, in time.Time, guest string) (string, string) {
			resp, err := e.Client.Do(ctx, client.Request{Region: entryRegion(e.Client.Targets.Regions, h.Region, o.Entry), Method: http.MethodPost, Path: "/v1/hotels/" + h.ID + "/reservations",
				Token: e.Client.Guest(guest), IdemKey: uuid.NewString(),
				Body: holdBody(guest, rt, in.Format(time.DateOnly), in.AddDate(0, 0, 1).Format(time.DateOnly), 1)})
			var res struct {
				ID string `json:"reservation_id"`
			}
			if err == nil && resp.Status == http.StatusCreated {
				_ = resp.Decode(&res)
			}
			return res.ID, client.Outcome(resp, err)
		}
		run("hold_http", holdHTTP)
		if o.Hot {
			e.settle(ctx)
			hot := cat.Hotels[0]
			pick = func() (seed.Hotel, string, time.Time) { return hot, hot.RoomTypes[0], first }
			run("hold_http_hot", holdHTTP)
		}
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
	if s, h := r.Ops["hold_http"], r.Ops["hold_http_hot"]; s.Count > 0 && h.Count > 0 {
		r.Figures["throughput_ratio_hot_to_spread"] = h.Throughput / s.Throughput
		r.Figures["p99_ratio_hot_to_spread"] = h.P99Ms / s.P99Ms
	}
	e.finish(ctx, r, ledger)
	return r, nil
}

// loadGenerator names this process's own row of a CPU table: the client,
// not part of the platform it measures.
const loadGenerator = "load generator"

// cpuMeter is the CPU accounting of the processes given and, with
// withPostgres, of the database's backends, or nil when asked for none.
func (e *Env) cpuMeter(given []cpu.Proc, withPostgres bool) *cpu.Meter {
	if len(given) == 0 && !withPostgres {
		return nil
	}
	procs := append([]cpu.Proc{{Name: loadGenerator, PID: os.Getpid()}}, given...)
	var backends func(context.Context) ([]cpu.Proc, error)
	if withPostgres && e.DB != nil {
		// The client backends of this database: the services' pools and the
		// loadtest's own (idle during a leg), one row per application_name
		// when the clients set one (cpu-per-hold.sh names each service's).
		// The server's background processes serve every database on it and
		// are not counted.
		backends = func(ctx context.Context) ([]cpu.Proc, error) {
			rows, err := e.DB.Query(ctx, `SELECT pid, application_name FROM pg_stat_activity
				WHERE datname = current_database() AND backend_type = 'client backend'`)
			if err != nil {
				return nil, fmt.Errorf("postgres backends: %w", err)
			}
			var out []cpu.Proc
			var pid int32
			var app string
			_, err = pgx.ForEachRow(rows, []any{&pid, &app}, func() error {
				name := "postgres backends"
				if app != "" {
					name += " (" + app + ")"
				}
				out = append(out, cpu.Proc{Name: name, PID: int(pid)})
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("postgres backends: %w", err)
			}
			return out, nil
		}
	}
	return cpu.NewMeter(procs, backends)
}

// cpuTable closes a leg's CPU accounting into the report.
func (e *Env) cpuTable(ctx context.Context, r *report.Report, m *cpu.Meter, op string, ops int64, load0 float64) {
	wall := m.Elapsed()
	rows, err := m.Stop(ctx, ops)
	if err != nil {
		r.Notes = append(r.Notes, "cpu accounting of "+op+": "+err.Error())
		return
	}
	t := report.CPUTable{Op: op, Ops: ops, WallS: wall.Seconds(), LoadAvg: []float64{load0, cpu.LoadAverage()}, Rows: rows}
	for _, row := range rows {
		t.TotalS += row.Seconds
		if row.Name != loadGenerator {
			t.PlatformS += row.Seconds
			t.PlatformSwitches += row.Switches
		}
		if row.Incomplete {
			r.Notes = append(r.Notes, fmt.Sprintf("cpu of %s: a process ended during %s; its last CPU is missing", row.Name, op))
		}
	}
	if ops > 0 {
		t.TotalMs = 1000 * t.TotalS / float64(ops)
		t.PlatformMs = 1000 * t.PlatformS / float64(ops)
		r.Figures["cpu_ms_per_"+op] = t.TotalMs
		r.Figures["cpu_ms_per_"+op+"_platform"] = t.PlatformMs
		t.PlatformSwitchesPerOp = float64(t.PlatformSwitches) / float64(ops)
		r.Figures["switches_per_"+op+"_platform"] = t.PlatformSwitchesPerOp
	}
	r.CPU = append(r.CPU, t)
}

// accountCPU runs rush — a leg or a burst of requests, returning how many
// it completed — under meter (cpuMeter's; nil: none), and adds its table to
// the report as op, per completed request: the burst's own CPU, without the
// seeding before it or the audit after.
func (e *Env) accountCPU(ctx context.Context, r *report.Report, meter *cpu.Meter, op string, rush func() int64) {
	if meter != nil {
		if err := meter.Start(ctx); err != nil {
			r.Notes = append(r.Notes, "cpu accounting off: "+err.Error())
			meter = nil
		}
	}
	load0 := cpu.LoadAverage()
	n := rush()
	if meter != nil {
		e.cpuTable(ctx, r, meter, op, n, load0)
	}
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
// notifications, and the ratio measures that, not the two paths. A backlog
// that does not shrink for 3 s has no relay draining it (a platform without
// one): it is not waited for.
func (e *Env) settle(ctx context.Context) {
	if e.DB == nil {
		return
	}
	start := time.Now()
	unsent, _, err := e.awaitRelayed(ctx, nil)
	if err != nil {
		e.logf("baseline: reading the outbox: %v", err)
	}
	// Consumers trail the relay by moments; give them those.
	time.Sleep(3 * time.Second)
	e.logf("baseline: settled after %s (%d events still unsent)", time.Since(start).Round(100*time.Millisecond), unsent)
}
