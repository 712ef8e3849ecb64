package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/berthhq/berth/loadtest/internal/scenario"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
)

// common are the flags every scenario shares; environment variables
// (BERTH_*, as written to .local/env) are the defaults.
type common struct {
	routers, bookings, dbURL, readModel string
	secret, adminToken, opsToken        string
	rate                                float64
	duration, timeout                   time.Duration
	workers, dbConns                    int
	out, name, sloFile                  string
	sloP99, sloErr                      []string
	maxErrorRate                        float64
	noDefaultSLO, quiet                 bool
}

func (c *common) register(cmd *cobra.Command, rate float64, duration time.Duration, workers int) {
	f := cmd.Flags()
	f.StringVar(&c.routers, "routers", os.Getenv("BERTH_ROUTER_URLS"), "region=url list of routers (BERTH_ROUTER_URLS)")
	f.StringVar(&c.bookings, "bookings", os.Getenv("BERTH_BOOKING_URLS"), "region=url list of booking services, used for regions whose router does not answer (BERTH_BOOKING_URLS)")
	f.StringVar(&c.dbURL, "db", os.Getenv("BERTH_DATABASE_URL"), "database URL for seeding and the audit (BERTH_DATABASE_URL)")
	f.StringVar(&c.readModel, "readmodel", os.Getenv("BERTH_READMODEL_URL"), "read model URL, audited when it answers (BERTH_READMODEL_URL)")
	f.Float64Var(&c.rate, "rate", rate, "arrivals per second (open loop); 0 = closed loop with --workers")
	f.DurationVar(&c.duration, "duration", duration, "how long to generate load")
	f.IntVar(&c.workers, "workers", workers, "concurrent workers (bounds in-flight requests)")
	f.IntVar(&c.dbConns, "db-conns", 16, "database pool size (audit, baseline)")
	f.DurationVar(&c.timeout, "timeout", 10*time.Second, "per-request timeout")
	f.StringVar(&c.out, "out", ".local/loadtest", "directory for the JSON and HTML reports")
	f.StringVar(&c.name, "name", "", "report file name (default <scenario>-<time>)")
	f.StringVar(&c.sloFile, "slo", "", "SLO file (YAML or JSON); replaces the scenario's default SLOs")
	f.StringSliceVar(&c.sloP99, "slo-p99", nil, "op=ms p99 objective (repeatable), e.g. hold=100")
	f.StringSliceVar(&c.sloErr, "slo-error-rate", nil, "op=fraction max error rate (repeatable)")
	f.Float64Var(&c.maxErrorRate, "max-error-rate", -1, "max error rate of every operation (default: none beyond the SLO file)")
	f.BoolVar(&c.noDefaultSLO, "no-default-slo", false, "do not apply the scenario's default SLOs")
	f.BoolVar(&c.quiet, "quiet", false, "no per-second progress line")
}

// slo builds the objectives: the file when given, else the scenario's
// defaults, then flags on top.
func (c *common) slo(defaults report.SLO) (report.SLO, error) {
	s := defaults
	if c.noDefaultSLO {
		s = report.SLO{}
	}
	if c.sloFile != "" {
		var err error
		if s, err = report.LoadSLO(c.sloFile); err != nil {
			return s, err
		}
	}
	if err := s.ParseOpLimits(c.sloP99, func(o *report.OpSLO, v float64) { o.P99Ms = v }); err != nil {
		return s, fmt.Errorf("--slo-p99: %w", err)
	}
	if err := s.ParseOpLimits(c.sloErr, func(o *report.OpSLO, v float64) { o.MaxErrorRate = v }); err != nil {
		return s, fmt.Errorf("--slo-error-rate: %w", err)
	}
	if c.maxErrorRate >= 0 {
		s.MaxErrorRate = &c.maxErrorRate
	}
	return s, nil
}

func (c *common) load() scenario.Load {
	return scenario.Load{Rate: c.rate, Duration: c.duration, Workers: c.workers}
}

// env connects to the platform (needHTTP) and the database.
func (c *common) env(ctx context.Context, cmd *cobra.Command, needHTTP bool) (*scenario.Env, func(), error) {
	e := &scenario.Env{Log: cmd.ErrOrStderr(), Command: "loadtest " + strings.Join(os.Args[1:], " "), Quiet: c.quiet}
	var closers []func()
	cleanup := func() {
		for _, f := range closers {
			f()
		}
	}
	if needHTTP {
		t, notes, err := client.ResolveTargets(ctx, c.routers, c.bookings)
		for _, n := range notes {
			fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
		}
		if err != nil {
			return nil, cleanup, err
		}
		e.Notes = notes
		cl, err := client.New(t, os.Getenv("BERTH_TOKEN_SECRET"), os.Getenv("BERTH_ADMIN_TOKEN"), os.Getenv("BERTH_OPS_TOKEN"), c.timeout)
		if err != nil {
			return nil, cleanup, err
		}
		e.Client = cl
		closers = append(closers, cl.Close)
		e.ReadModelURL = c.readModel
	}
	if c.dbURL != "" {
		cfg, err := pgxpool.ParseConfig(c.dbURL)
		if err != nil {
			return nil, cleanup, fmt.Errorf("database url: %w", err)
		}
		cfg.MaxConns = int32(max(c.dbConns, 2))
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, cleanup, fmt.Errorf("connect database: %w", err)
		}
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, cleanup, fmt.Errorf("ping database: %w", err)
		}
		e.DB = pool
		closers = append(closers, pool.Close)
		// The store's pool also runs baseline's hold_sql leg (the store's own
		// hold statements), so it is as large as the loadtest's own pool.
		store, err := postgres.Open(ctx, c.dbURL, postgres.Options{MaxConns: int32(max(c.dbConns, 2))})
		if err != nil {
			return nil, cleanup, fmt.Errorf("connect database: %w", err)
		}
		e.Store = store
		closers = append(closers, store.Close)
	} else {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: no database URL; the audit will fail (set BERTH_DATABASE_URL or --db)")
	}
	return e, cleanup, nil
}

// errFailed makes the process exit non-zero after a failed run.
var errFailed = errors.New("run failed")

// conclude evaluates SLOs, writes the reports, prints the summary and
// returns errFailed when an invariant broke or an SLO was missed.
func (c *common) conclude(w io.Writer, r *report.Report, slo report.SLO) error {
	if r.Status != report.StatusSkipped {
		r.SLO = report.Evaluate(slo, r)
	}
	r.Finish()
	name := c.name
	if name == "" {
		name = r.Scenario + "-" + r.StartedAt.Local().Format("20060102-150405")
	}
	jp, hp, err := r.Write(c.out, name)
	if err != nil {
		return err
	}
	printSummary(w, r)
	fmt.Fprintf(w, "report: %s\n        %s\n", jp, hp)
	switch r.Status {
	case report.StatusSkipped:
		fmt.Fprintf(w, "SKIPPED: %s\n", strings.Join(r.Notes, "; "))
		return nil
	case report.StatusFail:
		var why []string
		for _, ch := range r.Failed() {
			why = append(why, "INVARIANT VIOLATED: "+ch.Name+": "+ch.Detail)
		}
		for _, s := range r.SLOMissed() {
			why = append(why, fmt.Sprintf("SLO missed: %s = %.3f (limit %.3f)", s.Name, s.Actual, s.Limit))
		}
		fmt.Fprintf(w, "\n*** FAIL ***\n  %s\n", strings.Join(why, "\n  "))
		return fmt.Errorf("%w: %d invariant(s) violated, %d SLO(s) missed", errFailed, len(r.Failed()), len(r.SLOMissed()))
	}
	fmt.Fprintln(w, "PASS")
	return nil
}

func printSummary(w io.Writer, r *report.Report) {
	fmt.Fprintf(w, "\n== %s: %s — %.1f s, scheduled %d, completed %d, dropped %d\n", r.Scenario, r.Status,
		r.Engine.ElapsedS, r.Engine.Scheduled, r.Engine.Completed, r.Engine.Dropped)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "op\tcount\tops/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\terrors\toutcomes")
	for _, n := range r.OpNames() {
		s := r.Ops[n]
		var parts []string
		for k, v := range s.Outcomes {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f%%\t%s\n", n, s.Count, s.Throughput, s.P50Ms, s.P90Ms,
			s.P99Ms, s.P999Ms, s.MaxMs, 100*report.ErrorRate(s), strings.Join(sortStrings(parts), " "))
	}
	tw.Flush()
	figures := make([]string, 0, len(r.Figures))
	for k := range r.Figures {
		figures = append(figures, k)
	}
	for _, k := range sortStrings(figures) {
		fmt.Fprintf(w, "figure %s = %.3f\n", k, r.Figures[k])
	}
	for _, t := range r.CPU {
		fmt.Fprintf(w, "\nCPU during %s: %d ops in %.1f s (%.0f/s), load average %.1f → %.1f\n", t.Op, t.Ops, t.WallS,
			float64(t.Ops)/max(t.WallS, 1e-9), t.LoadAvg[0], t.LoadAvg[1])
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "process\tpids\tCPU s\tms per op\tswitches per op\t")
		for _, row := range t.Rows {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.3f\t%.1f\t\n", row.Name, row.PIDs, row.Seconds, row.MsPerOp, row.SwitchesPerOp)
		}
		fmt.Fprintf(tw, "total\t\t%.2f\t%.3f\t\t\n", t.TotalS, t.TotalMs)
		if t.PlatformS > 0 {
			fmt.Fprintf(tw, "platform (all but the load generator)\t\t%.2f\t%.3f\t%.1f\t\n", t.PlatformS, t.PlatformMs, t.PlatformSwitchesPerOp)
		}
		tw.Flush()
	}
	for _, ch := range r.Checks {
		mark := "ok  "
		switch {
		case ch.Skipped:
			mark = "skip"
		case !ch.OK:
			mark = "FAIL"
		}
		fmt.Fprintf(w, "[%s] %s — %s\n", mark, ch.Name, ch.Detail)
	}
	for _, s := range r.SLO {
		mark := "met   "
		if !s.OK {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "[slo %s] %s: %.3f (limit %.3f)\n", mark, s.Name, s.Actual, s.Limit)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}
