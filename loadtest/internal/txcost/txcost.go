// Package txcost is the write path's yardstick: in one run, on one scratch
// database of the server, it drives the minimal hold transaction (a
// conditional UPDATE of the stay's nights, a booking INSERT and an outbox
// INSERT — what the database can do per hold with nothing else in the way)
// and the store's own hold transaction (postgres.HoldScript, the statements
// Store.Hold sends, replayed by the Go driver and by pgbench — replay.go —
// and Store.Hold itself in-process), on spread inventory
// and on one hot row set, and reports the rates and their ratios. The
// machine is shared and noisy, so only ratios from one run mean anything.
package txcost

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/loadtest/internal/cpu"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/seed"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options shape the run.
type Options struct {
	Workers   int
	Duration  time.Duration
	Hotels    int
	RoomTypes int
	Nights    int // nights loaded per room type
	Stay      int // nights per hold
	// PgBench is the pgbench binary; "" looks in PATH and in the
	// PostgreSQL 15 package's directory, and skips the pgbench legs if
	// neither has it.
	PgBench string
	// Legs limits the run to legs whose name contains one of these ("" = all).
	Legs []string
	Keep bool // keep the scratch database
	// Batch is the largest batch of the batched leg (Store.SetHoldBatch).
	Batch int
	// Lanes is the batched leg's hold lanes (Store.SetHoldLanes); 0 keeps
	// the store's default, postgres.DefaultHoldLanes.
	Lanes int
	// Rounds runs each shape's legs this many times, every other round in
	// reverse order (A B … B A), so that a machine growing slower or faster
	// during the run moves the legs compared alike (order). 0 and 1: once.
	Rounds int
	Log    io.Writer
}

// Row is one leg's result.
type Row struct {
	Leg, Client, Shape string
	// Round is the round of the run the leg ran in (1, 2, …; Options.Rounds).
	Round        int
	Ops, Failed  int64
	Seconds      float64
	P50Ms, P99Ms float64
	// FirstError is one failure's message, to tell a broken leg from a slow one.
	FirstError string
	// Note says how the leg differs from what it stands for.
	Note string
	// Batches and Batched: the batched leg's batch transactions and the
	// holds decided in them; Groups and Grouped: its group transactions
	// (holds of idle room types together, docs/adr/0033-hold-groups.md)
	// and theirs. The rest ran alone.
	Batches, Batched, Groups, Grouped int64
	// BatchCycle: the batched leg's committed batches' time by phase
	// (postgres.BatchStats), summed.
	BatchLock, BatchDecide, BatchCommit time.Duration
	// BackendCPU and ClientCPU: the CPU time the leg cost the database's
	// backends and its client (cpu.go).
	BackendCPU, ClientCPU time.Duration
}

// CPUPerTx is the CPU time, backends and client, per committed transaction.
func (r Row) CPUPerTx() time.Duration {
	if r.Ops == 0 {
		return 0
	}
	return (r.BackendCPU + r.ClientCPU) / time.Duration(r.Ops)
}

// Rate is committed transactions per second.
func (r Row) Rate() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Seconds
}

// The legs, in the order each shape runs them.
const (
	LegMinimal     = "minimal"
	LegStoreScript = "store hold SQL"
	LegStore       = "store hold"
	// LegStoreBatched is Store.Hold with hot-partition batching on
	// (docs/adr/0010-hold-batching.md); LegStore runs with it off.
	LegStoreBatched = "store hold batched"
)

const region = "us-east"

// holdTTL is the hold TTL of every store leg.
const holdTTL = 10 * time.Minute

// The minimal hold transaction on its own tables (schema minimal), as in the
// raw-SQL yardstick every figure of docs/PERFORMANCE.md is compared with:
// per-night counters keyed by integers, a booking row, an outbox row.
var minimalSchema = []string{
	`CREATE SCHEMA minimal`,
	`CREATE TABLE minimal.room_inventory (
	   hotel_id BIGINT, room_type_id BIGINT, stay_date DATE, total_rooms INT, reserved INT DEFAULT 0,
	   PRIMARY KEY (hotel_id, room_type_id, stay_date), CHECK (reserved >= 0 AND reserved <= total_rooms))`,
	`CREATE TABLE minimal.booking (
	   hotel_id BIGINT, id UUID DEFAULT gen_random_uuid(), idem TEXT, room_type_id BIGINT, check_in DATE,
	   check_out DATE, qty INT, status TEXT, expires_at TIMESTAMPTZ, PRIMARY KEY (hotel_id, id), UNIQUE (idem))`,
	`CREATE TABLE minimal.outbox (
	   id UUID PRIMARY KEY DEFAULT gen_random_uuid(), hotel_id BIGINT, payload JSONB, created_at TIMESTAMPTZ DEFAULT now())`,
}

// minimalScript is the minimal transaction; hot locks the nights in date
// order first (concurrent multi-row UPDATEs otherwise deadlock: a bitmap
// heap scan visits rows in physical order, which changes as they update).
func minimalScript(hot bool) postgres.Script {
	const stay = `stay_date >= DATE '2027-01-01' + $3::int AND stay_date < DATE '2027-01-01' + $3::int + $4::int`
	var trips []postgres.Trip
	if hot {
		trips = append(trips, postgres.Trip{Steps: []postgres.Step{{Args: []string{"h", "t", "d", "n"},
			SQL: `SELECT 1 FROM minimal.room_inventory WHERE hotel_id = $1 AND room_type_id = $2 AND ` + stay + ` ORDER BY stay_date FOR UPDATE`}}})
	}
	trips = append(trips,
		postgres.Trip{Steps: []postgres.Step{{Args: []string{"h", "t", "d", "n"},
			SQL: `UPDATE minimal.room_inventory SET reserved = reserved + 1
			      WHERE hotel_id = $1 AND room_type_id = $2 AND reserved + 1 <= total_rooms AND ` + stay}}},
		postgres.Trip{Steps: []postgres.Step{{Args: []string{"h", "t", "d", "n"},
			SQL: `INSERT INTO minimal.booking (hotel_id, idem, room_type_id, check_in, check_out, qty, status, expires_at)
			      VALUES ($1, gen_random_uuid()::text, $2, DATE '2027-01-01' + $3::int, DATE '2027-01-01' + $3::int + $4::int,
			              1, 'held', now() + interval '15 minutes')`}}},
		postgres.Trip{Steps: []postgres.Step{{Args: []string{"h", "t"},
			SQL: `INSERT INTO minimal.outbox (hotel_id, payload)
			      VALUES ($1, jsonb_build_object('type', 'reservation.held', 'hotel_id', $1::bigint, 'room_type_id', $2::bigint))`}}})
	return postgres.Script{Name: "minimal", Trips: trips}
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// pgbenchScript renders a script of single-statement trips for pgbench: the
// header (meta-commands), BEGIN, the prelude (statements the transaction
// runs first; "" for none), every trip's statement one round trip with $n
// become :name, COMMIT. Every argument must be bound — a variable that the
// header, the prelude or a -D constant defines — because pgbench binds
// nothing from the trips' results the way the store does between them.
func pgbenchScript(sc postgres.Script, header, prelude string, bound map[string]bool) (string, error) {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("BEGIN;\n")
	b.WriteString(prelude)
	for _, t := range sc.Trips {
		if len(t.Steps) != 1 {
			return "", fmt.Errorf("%s: pgbench replays single-statement trips", sc.Name)
		}
		s := t.Steps[0]
		var bad error
		sql := placeholder.ReplaceAllStringFunc(s.SQL, func(m string) string {
			n, _ := strconv.Atoi(m[1:])
			switch {
			case n < 1 || n > len(s.Args):
				bad = fmt.Errorf("%s: %s has no argument", sc.Name, m)
			case !bound[s.Args[n-1]]:
				bad = fmt.Errorf("%s: argument %q of %s is bound by nothing pgbench runs", sc.Name, s.Args[n-1], m)
			default:
				return ":" + s.Args[n-1]
			}
			return m
		})
		if bad != nil {
			return "", bad
		}
		b.WriteString(strings.Join(strings.Fields(sql), " ") + ";\n")
	}
	b.WriteString("COMMIT;\n")
	return b.String(), nil
}

// Run creates the scratch database, seeds both schemas and runs every leg.
func Run(ctx context.Context, adminURL string, o Options) ([]Row, error) {
	if adminURL == "" {
		return nil, errors.New("no database URL (--db or BERTH_TEST_DATABASE_URL)")
	}
	if o.Stay < 1 || o.Nights < o.Stay+10 {
		return nil, fmt.Errorf("--stay %d with --nights %d: want 1 ≤ stay and nights ≥ stay + 10", o.Stay, o.Nights)
	}
	if o.Rounds < 0 {
		return nil, fmt.Errorf("--rounds %d: want 1 or more (0 runs once)", o.Rounds)
	}
	if o.Lanes < 0 || o.Lanes > 1000 {
		return nil, fmt.Errorf("--lanes %d: want 1 to 1000 (0: the service's default)", o.Lanes)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	name := "loadtest_txcost_" + hex.EncodeToString(b)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create scratch database: %w", err)
	}
	if o.Keep {
		o.logf("txcost: keeping database %s", name)
	} else {
		defer func() {
			_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		}()
	}
	u.Path = "/" + name
	dbURL := u.String()
	db, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: int32(o.Workers + 2)})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if db.Engine != postgres.EnginePostgres {
		return nil, errors.New("txcost runs on PostgreSQL (the minimal schema and pgbench are PostgreSQL's)")
	}
	if _, err := postgres.Migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	// Seeding and the minimal schema are the tool's own SQL, on a pool of
	// its own; the store keeps its pool to itself.
	raw, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	cat, err := seed.Hotels(ctx, raw, seed.Options{Hotels: o.Hotels, RoomTypes: o.RoomTypes, Nights: o.Nights,
		Rooms: 1_000_000, Regions: []string{region}, Workers: 2, KeepIDs: true, StartDay: 1})
	if err != nil {
		return nil, fmt.Errorf("seed the store's schema: %w", err)
	}
	for _, q := range minimalSchema {
		if _, err := raw.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("minimal schema: %w", err)
		}
	}
	if _, err := raw.Exec(ctx, `INSERT INTO minimal.room_inventory (hotel_id, room_type_id, stay_date, total_rooms)
		SELECT h, t, DATE '2027-01-01' + n, 1000000
		FROM generate_series(1, $1::int) h, generate_series(1, $2::int) t, generate_series(0, $3::int - 1) n`,
		o.Hotels, o.RoomTypes, o.Nights); err != nil {
		return nil, fmt.Errorf("seed the minimal schema: %w", err)
	}
	if _, err := raw.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return nil, fmt.Errorf("vacuum: %w", err)
	}
	o.logf("txcost: seeded %d hotels × %d room types × %d nights in both schemas of %s", o.Hotels, o.RoomTypes, o.Nights, name)

	pgbench := findPgBench(o.PgBench)
	if pgbench == "" {
		o.logf("txcost: pgbench not found (apt-get install postgresql-15); its legs are skipped")
	}
	first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	store := postgres.NewStore(db, region, holdTTL)
	store.SetHoldBatch(0) // one transaction per hold
	batched := postgres.NewStore(db, region, holdTTL)
	batched.SetHoldBatch(max(o.Batch, 2))
	if o.Lanes > 0 {
		batched.SetHoldLanes(o.Lanes)
	}
	meterConn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer meterConn.Close(context.WithoutCancel(ctx))
	var rows []Row
	for _, shape := range []string{"spread", "hot"} {
		hot := shape == "hot"
		// pick chooses a stay: anywhere on spread, always the same nights of
		// one room type when hot.
		pick := func(r *rand.Rand) (h, t, d int) {
			if hot {
				return 0, 0, 10
			}
			return r.IntN(o.Hotels), r.IntN(o.RoomTypes), r.IntN(o.Nights - o.Stay)
		}
		// Every hold is a guest of its own: the per-guest hold limit would
		// refuse one guest's sixth, and the yardstick measures holds, not it.
		holdReq := func(r *rand.Rand) reservation.HoldRequest {
			h, t, d := pick(r)
			in := reservation.DateOf(first.AddDate(0, 0, d))
			return reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: cat.Hotels[h].ID, RoomTypeID: cat.Hotels[h].RoomTypes[t],
				GuestID: fmt.Sprintf("txcost-%016x", r.Uint64()), Stay: reservation.Stay{CheckIn: in, CheckOut: in.AddDays(o.Stay)}, Quantity: 1}
		}
		// The replay by pgbench is prepared before its meter starts and its
		// rows checked after the meter stops: neither is the leg's work.
		var replay *holdReplay
		legs := []struct {
			leg, client string
			run         func() (Row, error)
			prepare     func() error
			check       func(Row) error
		}{
			{leg: LegMinimal, client: "pgbench", run: func() (Row, error) {
				if pgbench == "" {
					return Row{}, errSkip
				}
				return o.runPgBench(ctx, pgbench, dbURL, minimalScript(hot), hot)
			}},
			{leg: LegMinimal, client: "pgx", run: func() (Row, error) {
				sc := minimalScript(hot)
				return o.drive(ctx, func(ctx context.Context, r *rand.Rand) error {
					h, t, d := pick(r)
					return db.RunScript(ctx, sc, postgres.Vars{"h": h + 1, "t": t + 1, "d": d, "n": o.Stay})
				})
			}},
			{leg: LegStoreScript, client: "pgbench",
				prepare: func() error {
					if pgbench == "" {
						return errSkip
					}
					var err error
					replay, err = newHoldReplay(ctx, db, raw, o, cat.Hotels, first, hot, holdReq(rand.New(rand.NewPCG(rand.Uint64(), 1))))
					return err
				},
				run: func() (Row, error) {
					row, err := o.execPgBench(ctx, pgbench, dbURL, replay.script, replay.defs)
					row.Note = replay.note
					return row, err
				},
				check: func(row Row) error { return replay.check(ctx, raw, row) }},
			{leg: LegStoreScript, client: "pgx", run: func() (Row, error) {
				return o.drive(ctx, func(ctx context.Context, r *rand.Rand) error {
					sc, v := postgres.HoldScript(holdReq(r), region, holdTTL, uuid.NewString(), "txcost")
					return db.RunScript(ctx, sc, v)
				})
			}},
			{leg: LegStore, client: "in-process", run: func() (Row, error) { return o.driveStore(ctx, store, holdReq) }},
			{leg: LegStoreBatched, client: "in-process", run: func() (Row, error) {
				before := batched.HoldBatchStats()
				row, err := o.driveStore(ctx, batched, holdReq)
				after := batched.HoldBatchStats()
				row.Batches, row.Batched = after.Batches-before.Batches, after.Batched-before.Batched
				row.Groups, row.Grouped = after.Groups-before.Groups, after.Grouped-before.Grouped
				row.BatchLock, row.BatchDecide, row.BatchCommit = after.Lock-before.Lock, after.Decide-before.Decide, after.Commit-before.Commit
				return row, err
			}},
		}
		var wanted []int
		for i, l := range legs {
			if o.wants(l.leg + " " + l.client) {
				wanted = append(wanted, i)
			}
		}
		for _, turn := range order(len(wanted), o.Rounds) {
			l := legs[wanted[turn.Leg]]
			if ctx.Err() != nil {
				return rows, ctx.Err()
			}
			if l.prepare != nil {
				if err := l.prepare(); errors.Is(err, errSkip) {
					continue
				} else if err != nil {
					return rows, fmt.Errorf("%s (%s, %s): %w", l.leg, l.client, shape, err)
				}
			}
			meter := meterBackends(ctx, meterConn)
			self := selfCPU()
			row, err := l.run()
			if l.client != "pgbench" {
				row.ClientCPU = selfCPU() - self // pgbench's own is its process's
			}
			backends, merr := meter.Stop()
			if errors.Is(err, errSkip) {
				continue
			}
			if err == nil && merr != nil {
				err = fmt.Errorf("backend CPU: %w", merr)
			}
			if err == nil && l.check != nil {
				err = l.check(row)
			}
			if err != nil {
				return rows, fmt.Errorf("%s (%s, %s): %w", l.leg, l.client, shape, err)
			}
			row.BackendCPU = backends
			row.Leg, row.Client, row.Shape, row.Round = l.leg, l.client, shape, turn.Round
			o.logf("txcost: %-18s %-10s %-6s %7.0f tx/s  %4.0f µs CPU/tx (backends %.0f, client %.0f)  failed %d  load %.1f%s", row.Leg, row.Client,
				row.Shape, row.Rate(), micros(row.CPUPerTx()), perTx(row.BackendCPU, row.Ops), perTx(row.ClientCPU, row.Ops), row.Failed,
				cpu.LoadAverage(), row.batchNote())
			rows = append(rows, row)
		}
	}
	return rows, nil
}

var errSkip = errors.New("skipped")

// step is one leg's turn: the leg's index among a shape's legs and its round.
type step struct{ Leg, Round int }

// order returns the turns of a shape's legs over the run's rounds: the legs
// in order in odd rounds, in reverse in even ones (A B C, C B A, A B C, …). Over two
// rounds every leg's mean turn is the same, so a drift of the machine's
// speed that is linear in time weighs on every leg alike; with one round
// the first leg (the minimal transaction) runs on the freshest machine.
func order(legs, rounds int) []step {
	rounds = max(rounds, 1)
	out := make([]step, 0, legs*rounds)
	for r := 1; r <= rounds; r++ {
		for i := range legs {
			leg := i
			if r%2 == 0 {
				leg = legs - 1 - i
			}
			out = append(out, step{Leg: leg, Round: r})
		}
	}
	return out
}

func (o Options) wants(leg string) bool {
	if len(o.Legs) == 0 {
		return true
	}
	for _, l := range o.Legs {
		if strings.Contains(leg, l) {
			return true
		}
	}
	return false
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// render is the stored answer of the in-process leg: the value as JSON,
// as the HTTP layer stores it — a hold's reservation by hand
// (reservation's AppendJSON, json.Marshal's bytes), as the booking service
// renders it, anything else by encoding/json.
func render(value any, err error) (int, []byte) {
	if err != nil {
		return 409, []byte(`{"code":"` + string(berth.ErrorCode(err)) + `"}`)
	}
	if r, ok := value.(reservation.Reservation); ok {
		if b, ok := r.AppendJSON(make([]byte, 0, 640)); ok {
			return 201, b
		}
	}
	b, _ := json.Marshal(value)
	return 201, b
}

// driveStore drives Store.Hold in-process: every hold a guest and a key
// of its own, each answer a 201.
func (o Options) driveStore(ctx context.Context, s *postgres.Store, holdReq func(*rand.Rand) reservation.HoldRequest) (Row, error) {
	return o.drive(ctx, func(ctx context.Context, r *rand.Rand) error {
		resp, err := s.Hold(ctx, holdReq(r), &berth.Idem{Key: uuid.NewString(), Hash: "txcost", Render: render})
		if err == nil && resp.Status != 201 {
			err = fmt.Errorf("hold answered %d: %s", resp.Status, resp.Body)
		}
		return err
	})
}

// batchNote says how the batched leg's holds were decided.
func (r Row) batchNote() string {
	var notes []string
	if r.Batches > 0 {
		notes = append(notes, fmt.Sprintf("%d batches, %.1f holds each; %d of %d holds batched", r.Batches,
			float64(r.Batched)/float64(r.Batches), r.Batched, r.Ops))
		if r.BatchLock+r.BatchDecide+r.BatchCommit > 0 {
			per := func(d time.Duration) int64 { return d.Microseconds() / r.Batches }
			notes = append(notes, fmt.Sprintf("a batch: lock %d µs, decide %d µs, commit %d µs", per(r.BatchLock),
				per(r.BatchDecide), per(r.BatchCommit)))
		}
	}
	if r.Groups > 0 {
		notes = append(notes, fmt.Sprintf("%d groups, %.1f holds each; %d of %d holds grouped", r.Groups,
			float64(r.Grouped)/float64(r.Groups), r.Grouped, r.Ops))
	}
	if len(notes) == 0 {
		return ""
	}
	return "  (" + strings.Join(notes, "; ") + ")"
}

// drive runs op on Workers goroutines, closed loop, for Duration
// (engine.ClosedLoop); a leg still running 30 s past its end is cut off.
func (o Options) drive(ctx context.Context, op func(context.Context, *rand.Rand) error) (Row, error) {
	runCtx, stop := context.WithDeadline(ctx, time.Now().Add(o.Duration+30*time.Second))
	defer stop()
	c := engine.ClosedLoop(runCtx, o.Workers, o.Duration, op)
	row := Row{Seconds: c.Seconds, Ops: c.Ops, Failed: c.Failed, P50Ms: c.P50Ms, P99Ms: c.P99Ms}
	if c.FirstError != nil {
		row.FirstError = c.FirstError.Error()
	}
	return row, ctx.Err()
}

// runPgBench runs sc with pgbench -M prepared, Workers clients, for Duration.
func (o Options) runPgBench(ctx context.Context, bin, dbURL string, sc postgres.Script, hot bool) (Row, error) {
	header := fmt.Sprintf("\\set h random(1, %d)\n\\set t random(1, %d)\n\\set d random(0, %d)\n", o.Hotels, o.RoomTypes, o.Nights-o.Stay-1)
	if hot {
		header = "\\set h 1\n\\set t 1\n\\set d 10\n"
	}
	header += fmt.Sprintf("\\set n %d\n", o.Stay)
	text, err := pgbenchScript(sc, header, "", map[string]bool{"h": true, "t": true, "d": true, "n": true})
	if err != nil {
		return Row{}, err
	}
	return o.execPgBench(ctx, bin, dbURL, text, nil)
}

// execPgBench runs the pgbench script text with pgbench -M prepared,
// Workers clients on 2 threads, for Duration, with the variables defs
// ("name=value").
func (o Options) execPgBench(ctx context.Context, bin, dbURL, text string, defs []string) (Row, error) {
	f, err := os.CreateTemp("", "txcost-*.sql")
	if err != nil {
		return Row{}, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return Row{}, err
	}
	if err := f.Close(); err != nil {
		return Row{}, err
	}
	secs := max(int(o.Duration.Round(time.Second).Seconds()), 1)
	args := []string{"-M", "prepared", "-c", strconv.Itoa(o.Workers), "-j", "2", "-T", strconv.Itoa(secs), "-n", "-f", f.Name()}
	for _, d := range defs {
		args = append(args, "-D", d)
	}
	cmd := exec.CommandContext(ctx, bin, append(args, dbURL)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return Row{}, fmt.Errorf("pgbench: %w\n%s", err, out.String())
	}
	row := Row{Seconds: float64(secs), ClientCPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	sc2 := bufio.NewScanner(&out)
	for sc2.Scan() {
		line := sc2.Text()
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "number of transactions actually processed:") && len(fields) >= 6:
			row.Ops, _ = strconv.ParseInt(fields[5], 10, 64)
		case strings.HasPrefix(line, "number of failed transactions:") && len(fields) >= 5:
			row.Failed, _ = strconv.ParseInt(fields[4], 10, 64)
		case strings.HasPrefix(line, "latency average =") && len(fields) >= 4:
			row.P50Ms, _ = strconv.ParseFloat(fields[3], 64) // pgbench reports the mean only
		}
	}
	if row.Ops == 0 {
		return row, fmt.Errorf("pgbench processed no transaction:\n%s", out.String())
	}
	return row, nil
}

func findPgBench(flag string) string {
	if flag != "" {
		return flag
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"} {
		p := filepath.Join(dir, "pgbench")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// Print writes the table: every leg's rate, and its ratio to the minimal
// transaction of the same shape, run by pgbench and by the Go driver.
func Print(w io.Writer, o Options, rows []Row) {
	rounds := max(o.Rounds, 1)
	fmt.Fprintf(w, "\ntxcost: %d workers, %s per leg, %d-night holds; spread = %d hotels × %d room types × %d nights, hot = the same %d nights of one room type\n",
		o.Workers, o.Duration, o.Stay, o.Hotels, o.RoomTypes, o.Nights, o.Stay)
	if rounds > 1 {
		fmt.Fprintf(w, "%d rounds, every other one in reverse order; each ratio is to the minimal transaction of its own round\n", rounds)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	round := ""
	if rounds > 1 {
		round = "round\t"
	}
	fmt.Fprintln(tw, round+"leg\tclient\tshape\ttx/s\tfailed\tp50 ms\tp99 ms\t÷ minimal (pgbench)\t÷ minimal (pgx)\tµs CPU/tx\t÷ minimal by CPU (pgbench)\t")
	for _, r := range rows {
		p50, p99 := fmt.Sprintf("%.2f", r.P50Ms), fmt.Sprintf("%.2f", r.P99Ms)
		if r.Client == "pgbench" {
			p50, p99 = fmt.Sprintf("(mean %.2f)", r.P50Ms), "—"
		}
		if rounds > 1 {
			fmt.Fprintf(tw, "%d\t", r.Round)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%d\t%s\t%s\t%s\t%s\t%.0f\t%s\t\n", r.Leg, r.Client, r.Shape, r.Rate(), r.Failed, p50, p99,
			ratioText(rateRatio(rows, r, "pgbench")), ratioText(rateRatio(rows, r, "pgx")), micros(r.CPUPerTx()), ratioText(cpuRatio(rows, r)))
	}
	tw.Flush()
	if rounds > 1 {
		printRounds(w, rows)
	}
	printAims(w, rows)
	for _, r := range rows {
		if note := r.batchNote(); note != "" {
			fmt.Fprintf(w, "%s (%s, %s%s):%s\n", r.Leg, r.Client, r.Shape, roundOf(rounds, r), note)
		}
	}
	for _, r := range rows {
		if r.Note != "" && r.Round <= 1 {
			fmt.Fprintf(w, "%s (%s, %s): %s\n", r.Leg, r.Client, r.Shape, r.Note)
		}
	}
	for _, r := range rows {
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s (%s, %s%s): first failure: %s\n", r.Leg, r.Client, r.Shape, roundOf(rounds, r), r.FirstError)
		}
	}
}

// roundOf names r's round in a note when the run had several.
func roundOf(rounds int, r Row) string {
	if rounds <= 1 {
		return ""
	}
	return fmt.Sprintf(", round %d", r.Round)
}

// minimalOf is the minimal transaction's row by client of r's shape and
// round.
func minimalOf(rows []Row, r Row, client string) (Row, bool) {
	for _, m := range rows {
		if m.Leg == LegMinimal && m.Client == client && m.Shape == r.Shape && m.Round == r.Round {
			return m, true
		}
	}
	return Row{}, false
}

// rateRatio is r's rate over the minimal transaction's by client, same
// shape and round (0: none to compare with).
func rateRatio(rows []Row, r Row, client string) float64 {
	m, ok := minimalOf(rows, r, client)
	if !ok || m.Rate() == 0 {
		return 0
	}
	return r.Rate() / m.Rate()
}

// cpuRatio is oriented as the rate's: the minimal transaction's (pgbench)
// CPU per transaction over r's, same shape and round (above 1: r is
// cheaper; 0: none to compare with).
func cpuRatio(rows []Row, r Row) float64 {
	m, ok := minimalOf(rows, r, "pgbench")
	if !ok || r.CPUPerTx() == 0 {
		return 0
	}
	return float64(m.CPUPerTx()) / float64(r.CPUPerTx())
}

func ratioText(x float64) string {
	if x == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

// printRounds sums up a run of several rounds: per leg, its mean rate,
// and its ratios to the minimal transaction (pgbench) round by round and
// their mean.
func printRounds(w io.Writer, rows []Row) {
	type key struct{ leg, client, shape string }
	var order []key
	by := map[key][]Row{}
	for _, r := range rows {
		k := key{r.Leg, r.Client, r.Shape}
		if _, seen := by[k]; !seen {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	fmt.Fprintln(w, "\nover the rounds:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "leg\tclient\tshape\tmean tx/s\t÷ minimal (pgbench), each round\tmean\t÷ minimal by CPU, each round\tmean\t")
	for _, k := range order {
		var (
			rate        float64
			rates, cpus []string
		)
		for _, r := range by[k] {
			rate += r.Rate() / float64(len(by[k]))
			if x := rateRatio(rows, r, "pgbench"); x > 0 {
				rates = append(rates, ratioText(x))
			}
			if x := cpuRatio(rows, r); x > 0 {
				cpus = append(cpus, ratioText(x))
			}
		}
		meanRate, meanCPU := meanRatios(rows, k.leg, k.client, k.shape)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t\n", k.leg, k.client, k.shape, rate,
			strings.Join(rates, ", "), ratioText(meanRate), strings.Join(cpus, ", "), ratioText(meanCPU))
	}
	tw.Flush()
}

// Issue 17's aims for the store as shipped (the "store hold batched" leg,
// in-process) against pgbench's minimal transaction of the same shape: on
// spread inventory at least AimSpread of its rate, on one hot row set at
// least AimHot times it (there pgbench is one transaction per hold, its
// nights locked in date order).
const (
	AimSpread = 0.7
	AimHot    = 3.0
)

// printAims says whether the run met each aim, by rate and by CPU per
// transaction, each the mean of its rounds' ratios (the aims are set by
// rate; the CPU ratio is what a machine whose speed drifts moves least).
func printAims(w io.Writer, rows []Row) {
	var lines []string
	for _, a := range []struct {
		shape string
		aim   float64
	}{{"spread", AimSpread}, {"hot", AimHot}} {
		rate, cpu := meanRatios(rows, LegStoreBatched, "in-process", a.shape)
		if rate == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-6s ≥ %.1f ×: by rate %.2f (%s), by CPU %s (%s)", a.shape, a.aim,
			rate, metText(rate, a.aim), ratioText(cpu), metText(cpu, a.aim)))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\nissue 17's aims, the store as shipped (%s, in-process) ÷ the minimal transaction (pgbench), same shape and round:\n", LegStoreBatched)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// meanRatios are the leg's ratios to the minimal transaction (pgbench) of
// its shape, by rate and by CPU, each averaged over the rounds that have
// one (0: none).
func meanRatios(rows []Row, leg, client, shape string) (rate, cpu float64) {
	var nRate, nCPU int
	for _, r := range rows {
		if r.Leg != leg || r.Client != client || r.Shape != shape {
			continue
		}
		if x := rateRatio(rows, r, "pgbench"); x > 0 {
			rate, nRate = rate+x, nRate+1
		}
		if x := cpuRatio(rows, r); x > 0 {
			cpu, nCPU = cpu+x, nCPU+1
		}
	}
	if nRate > 0 {
		rate /= float64(nRate)
	}
	if nCPU > 0 {
		cpu /= float64(nCPU)
	}
	return rate, cpu
}

// metText says whether x meets aim as printed (two decimals), so that a
// ratio shown as 0.70 never reads "not met" against 0.7.
func metText(x, aim float64) string {
	switch {
	case x == 0:
		return "no figure"
	case math.Round(x*100)/100 >= aim:
		return "met"
	}
	return "not met"
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// perTx is d per transaction in µs.
func perTx(d time.Duration, ops int64) float64 {
	if ops == 0 {
		return 0
	}
	return micros(d) / float64(ops)
}

// Verify fails the run when a leg failed transactions: a yardstick that
// measures errors measures nothing.
func Verify(rows []Row) error {
	for _, r := range rows {
		if r.Failed > 0 {
			return fmt.Errorf("%s (%s, %s): %d transactions failed", r.Leg, r.Client, r.Shape, r.Failed)
		}
	}
	return nil
}
