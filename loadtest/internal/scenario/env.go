// Package scenario holds the loadtest scenarios: each seeds what it needs,
// drives the platform through the engine, audits the database afterwards
// and returns a report.
package scenario

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/cpu"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Env is what every scenario drives and audits.
type Env struct {
	Client *client.Client // nil for database-only scenarios
	DB     *pgxpool.Pool  // seeding and the loadtest's own queries
	// Store is the same database through Berth's store, for the audit of
	// `booking verify` (postgres.Verify).
	Store        *postgres.DB
	ReadModelURL string
	Log          io.Writer // progress and notes (stderr)
	Notes        []string  // from target resolution
	Command      string
	Quiet        bool // no per-second progress line
	// CPUProcs and CPUPostgres: the processes (and, with CPUPostgres, the
	// database's backends) whose CPU a rush scenario accounts over its
	// burst alone (accountCPU); none, no accounting.
	CPUProcs    []cpu.Proc
	CPUPostgres bool
}

// Load is the arrival process of a scenario.
type Load struct {
	Rate          float64
	Duration      time.Duration
	Workers       int
	MaxIterations int64
}

func (l Load) config() map[string]any {
	return map[string]any{"rate_per_s": l.Rate, "duration": l.Duration.String(), "workers": l.Workers, "max_iterations": l.MaxIterations}
}

func (e *Env) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

func (e *Env) newReport(name string, cfg map[string]any) *report.Report {
	host, _ := os.Hostname()
	r := &report.Report{Scenario: name, StartedAt: time.Now().UTC(), Host: host, Command: e.Command, Config: cfg,
		Figures: map[string]float64{}, Notes: append([]string(nil), e.Notes...)}
	if e.Client != nil {
		r.Targets = map[string]string{}
		for _, reg := range e.Client.Targets.Regions {
			r.Targets[reg] = e.Client.Targets.URL[reg] + " (" + e.Client.Targets.Kind[reg] + ")"
		}
	}
	return r
}

// drive runs the engine and fills the report's measurements.
func (e *Env) drive(ctx context.Context, r *report.Report, l Load, rec *engine.Recorder, status func() string, task engine.Task) engine.Result {
	cfg := engine.Config{Rate: l.Rate, Duration: l.Duration, MaxIterations: l.MaxIterations, Workers: l.Workers, Status: status}
	if !e.Quiet {
		cfg.Progress = e.Log
	}
	res := engine.Run(ctx, cfg, rec, task)
	r.Engine = res
	r.Ops = rec.Ops(res.Elapsed)
	r.Timeline = rec.Timeline()
	if res.Dropped > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d arrivals dropped: the generator's queue was full (the system fell far behind the schedule)", res.Dropped))
	}
	return res
}

// finish audits the database and the read model and appends the checks.
func (e *Env) finish(ctx context.Context, r *report.Report, l *audit.Ledger) {
	if e.Client != nil && e.Client.Follows.Load() > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d write(s) answered 421 and were re-sent to the home region", e.Client.Follows.Load()))
	}
	if e.DB == nil || e.Store == nil {
		r.Checks = append(r.Checks, report.Check{Name: "database audit", OK: false, Detail: "no database URL (BERTH_DATABASE_URL): the invariant could not be checked"})
		return
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	r.Checks = append(r.Checks, audit.Run(actx, e.Store, e.DB, l)...)
	r.Checks = append(r.Checks, e.readModel(actx, l))
}

// pick returns a random element.
func pick[T any](xs []T) T { return xs[rand.IntN(len(xs))] }

// day returns the date n days from today (UTC).
func day(n int) string { return time.Now().UTC().AddDate(0, 0, n).Format(time.DateOnly) }

func shortID(s string) string {
	if i := strings.IndexByte(s, '-'); i > 0 {
		return s[:i]
	}
	return s
}

// connectClients opens the connections clients hold while they wait on a
// page before a rush (a flash sale's, a clinic's 07:00 opening): through
// every region's entry point, one per client entering there (clients go
// round-robin over the regions), up to the requests the rush can have in
// flight (workers), each by one read of page sent on a connection of its
// own (client.OnNewConnection), which the generator's transport then keeps
// idle for the rush. Every read must answer 200.
func (e *Env) connectClients(ctx context.Context, page string, clients, workers int) error {
	regions := e.Client.Targets.Regions
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for k, region := range regions {
		n := clients / len(regions)
		if k < clients%len(regions) {
			n++
		}
		if workers > 0 {
			n = min(n, workers)
		}
		for range n {
			wg.Go(func() {
				resp, err := e.Client.Do(client.OnNewConnection(ctx), client.Request{Region: region, Method: http.MethodGet, Path: page})
				if err == nil && resp.Status != http.StatusOK {
					err = fmt.Errorf("answered %d", resp.Status)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("via %s: %w", region, err))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of its reads failed, the first %w", len(errs), errs[0])
	}
	return nil
}
