package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/time/rate"
)

// shardsConfig is what every `router shards` command needs.
type shardsConfig struct {
	DatabaseURL string
	Output      string // text or json
}

func loadShardsConfig(cmd *cobra.Command) (shardsConfig, error) {
	c := shardsConfig{DatabaseURL: config.Env("BERTH_DATABASE_URL", "")}
	c.Output, _ = cmd.Flags().GetString("output")
	var errs config.Errors
	if c.DatabaseURL == "" {
		errs.Add("BERTH_DATABASE_URL: required")
	}
	if c.Output != "text" && c.Output != "json" {
		errs.Add("--output %q: want text or json", c.Output)
	}
	if err := errs.Err(); err != nil {
		return c, cli.Usage(err)
	}
	return c, nil
}

// openPlacements connects for an operator command. The lock timeout matters:
// a move waiting for the placement row also queues the partition's bookings
// behind it, so it must give up quickly (and retry) rather than wait long.
func openPlacements(ctx context.Context, cfg shardsConfig) (*postgres.Placements, func(), error) {
	db, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{
		MaxConns: 4, LockTimeout: 2 * time.Second, StatementTimeout: 60 * time.Second})
	if err != nil {
		return nil, nil, fmt.Errorf("database: %w", err)
	}
	return postgres.NewPlacements(db), db.Close, nil
}

func newShardsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "List, move, drain and balance partitions between regions",
		Long: `shards manages the placement directory directly in the database
(BERTH_DATABASE_URL). Every move is one short transaction, safe while traffic
flows: in-flight writes of the partition finish first, later ones are
refused by the old region (421) and re-sent by the routers to the new one.

Exit codes: 0 done, 1 failed or interrupted, 2 usage error.`,
		Args: cobra.ArbitraryArgs,
		RunE: needSubcommand,
		// Right after `make up`, BERTH_DATABASE_URL is in .local/env.
		PersistentPreRunE: cli.LocalEnv,
	}
	cmd.PersistentFlags().StringP("output", "o", "text", "output format: text or json")
	cmd.AddCommand(newListCmd(), newMoveCmd(), newDrainCmd(), newBalanceCmd())
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ---- list -------------------------------------------------------------

func newListCmd() *cobra.Command {
	var showPartitions bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Per region: partitions by kind, reservations, appointments and recent writes",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadShardsConfig(cmd)
			if err != nil {
				return err
			}
			return runList(ctxOrBackground(cmd.Context()), cfg, showPartitions, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&showPartitions, "partitions", false, "also list every partition with its writes in the last 15 minutes")
	return cmd
}

type listOutput struct {
	Regions    []postgres.RegionStats `json:"regions"`
	Partitions []placement.Item       `json:"partitions,omitempty"`
}

func runList(ctx context.Context, cfg shardsConfig, showPartitions bool, out io.Writer) error {
	store, closeDB, err := openPlacements(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	var res listOutput
	if res.Regions, err = store.RegionStats(ctx, berth.Regions()); err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if showPartitions {
		if res.Partitions, err = store.PartitionLoads(ctx, 15*time.Minute); err != nil {
			return fmt.Errorf("list: %w", err)
		}
	}
	if cfg.Output == "json" {
		return writeJSON(out, res)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "REGION\tHOTELS\tCLINICS\tRESERVATIONS\tAPPOINTMENTS\tWRITES 5m\tWRITES 15m\t")
	for _, s := range res.Regions {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", s.Region, s.Partitions[berth.KindHotel], s.Partitions[berth.KindClinic],
			s.Reservations, s.Appointments, s.Writes5m, s.Writes15m)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if showPartitions {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tPARTITION\tREGION\tWRITES 15m")
		for _, it := range res.Partitions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", it.Kind, it.PartitionID, it.Region, it.Weight)
		}
		return tw.Flush()
	}
	return nil
}

// ---- move -------------------------------------------------------------

func newMoveCmd() *cobra.Command {
	var kind, id, to string
	cmd := &cobra.Command{
		Use:     "move",
		Short:   "Move one partition to another region",
		Example: "  router shards move --kind hotel --id 3f0c…-… --to eu-west",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadShardsConfig(cmd)
			if err != nil {
				return err
			}
			var errs config.Errors
			if !berth.Kind(kind).Valid() {
				errs.Add("--kind %q: want hotel or clinic", kind)
			}
			if id == "" {
				errs.Add("--id: required")
			}
			if !berth.ValidRegion(to) {
				errs.Add("--to %q: want one of %v", to, berth.Regions())
			}
			if err := errs.Err(); err != nil {
				return cli.Usage(err)
			}
			ctx := ctxOrBackground(cmd.Context())
			store, closeDB, err := openPlacements(ctx, cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			res, err := moveWithRetry(ctx, store, berth.Kind(kind), strings.ToLower(id), to)
			if err != nil {
				return err
			}
			if cfg.Output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			if !res.Moved {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s is already homed in %s (version %d); nothing to do\n", res.Kind, res.PartitionID, res.HomeRegion, res.Version)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "moved %s %s: %s → %s (version %d, %d rows re-homed)\n",
				res.Kind, res.PartitionID, res.FromRegion, res.HomeRegion, res.Version, res.Rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "hotel or clinic")
	cmd.Flags().StringVar(&id, "id", "", "partition id (hotel_id or clinic_id)")
	cmd.Flags().StringVar(&to, "to", "", "target region")
	return cmd
}

// moveWithRetry moves a partition, retrying a few times when the partition
// is busy (lock timeout) or the database hiccups.
func moveWithRetry(ctx context.Context, store *postgres.Placements, kind berth.Kind, id, to string) (placement.MoveResult, error) {
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		res, err := store.MovePlacement(ctx, kind, id, to)
		if err == nil {
			return res, nil
		}
		if berth.ErrorCode(err) != berth.CodeUnavailable || attempt >= 5 || ctx.Err() != nil {
			return res, fmt.Errorf("move %s %s to %s: %w", kind, id, to, err)
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("move %s %s to %s: %w", kind, id, to, ctx.Err())
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// ---- applying a plan (drain, balance) ----------------------------------

// planSummary is the JSON answer of drain and balance.
type planSummary struct {
	Plan    []placement.Move `json:"plan"`
	Applied int              `json:"applied"`
	DryRun  bool             `json:"dry_run"`
	Done    bool             `json:"done"`
}

// applyPlan performs the moves of plan at most ratePerSec per second,
// showing progress on out: a progress bar on a terminal, a line per move
// otherwise (nothing in JSON mode). It stops at the first failure or when
// ctx ends, and reports how many moves it applied.
func applyPlan(ctx context.Context, store *postgres.Placements, plan []placement.Move, ratePerSec float64, out io.Writer, textOut bool, what string) (int, error) {
	lim := rate.NewLimiter(rate.Limit(ratePerSec), 1)
	var bar *progressbar.ProgressBar
	if textOut && isTerminal(out) {
		bar = progressbar.NewOptions(len(plan), progressbar.OptionSetWriter(out), progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())
	}
	for i, m := range plan {
		if err := lim.Wait(ctx); err != nil {
			return i, fmt.Errorf("%s interrupted after %d of %d moves: %w", what, i, len(plan), context.Cause(ctx))
		}
		res, err := moveWithRetry(ctx, store, m.Kind, m.PartitionID, m.To)
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%s interrupted after %d of %d moves: %w", what, i, len(plan), context.Cause(ctx))
			}
			return i, err
		}
		switch {
		case bar != nil:
			_ = bar.Add(1)
		case textOut:
			fmt.Fprintf(out, "%s: [%d/%d] moved %s %s %s → %s (version %d)\n", what, i+1, len(plan), m.Kind, m.PartitionID, res.FromRegion, res.HomeRegion, res.Version)
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return len(plan), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func printPlan(out io.Writer, plan []placement.Move, weightName string) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "KIND\tPARTITION\tFROM\tTO\t%s\n", strings.ToUpper(weightName))
	for _, m := range plan {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", m.Kind, m.PartitionID, m.From, m.To, m.Weight)
	}
	_ = tw.Flush()
}

// ---- drain ------------------------------------------------------------

type drainOptions struct {
	Region string
	To     []string
	Rate   float64
	DryRun bool
}

func newDrainCmd() *cobra.Command {
	var (
		o  drainOptions
		to string
	)
	cmd := &cobra.Command{
		Use:   "drain",
		Short: "Move every partition out of a region",
		Long: `drain moves every partition homed in --region to the regions in --to (default:
all others), each to the target carrying the fewest partitions so far, at
most --rate moves per second so bookings keep flowing.

Resumable: drain keeps no state of its own. Each run reads which partitions
are still homed in the region and plans only those, and a move of a
partition already moved is a no-op — so after an interruption (Ctrl-C, a
killed pod, a failed move) run the same command again and it finishes the job.`,
		Example: "  router shards drain --region us-east --to eu-west,ap-south --rate 5",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadShardsConfig(cmd)
			if err != nil {
				return err
			}
			if to != "" {
				for _, r := range strings.Split(to, ",") {
					o.To = append(o.To, strings.TrimSpace(r))
				}
			}
			return runDrain(ctxOrBackground(cmd.Context()), cfg, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.Region, "region", "", "region to empty")
	cmd.Flags().StringVar(&to, "to", "", "comma-separated target regions (default: every other region)")
	cmd.Flags().Float64Var(&o.Rate, "rate", 2, "moves per second at most")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "print the plan, move nothing")
	return cmd
}

func runDrain(ctx context.Context, cfg shardsConfig, o drainOptions, out io.Writer) error {
	var errs config.Errors
	if !berth.ValidRegion(o.Region) {
		errs.Add("--region %q: want one of %v", o.Region, berth.Regions())
	}
	if len(o.To) == 0 {
		for _, r := range berth.Regions() {
			if r != o.Region {
				o.To = append(o.To, r)
			}
		}
	}
	for _, r := range o.To {
		if !berth.ValidRegion(r) {
			errs.Add("--to %q: want regions of %v", r, berth.Regions())
		}
		if r == o.Region {
			errs.Add("--to may not name the drained region %s", r)
		}
	}
	if o.Rate <= 0 {
		errs.Add("--rate: want a positive number of moves per second")
	}
	if err := errs.Err(); err != nil {
		return cli.Usage(err)
	}
	store, closeDB, err := openPlacements(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	items, err := store.PartitionLoads(ctx, 0)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	plan := placement.DrainPlan(items, o.Region, o.To)
	text := cfg.Output == "text"
	if text {
		fmt.Fprintf(out, "drain %s: %d partitions left to move to %s\n", o.Region, len(plan), strings.Join(o.To, ", "))
		if o.DryRun {
			printPlan(out, plan, "partitions")
		}
	}
	sum := planSummary{Plan: plan, DryRun: o.DryRun}
	if sum.Plan == nil {
		sum.Plan = []placement.Move{}
	}
	if !o.DryRun {
		sum.Applied, err = applyPlan(ctx, store, plan, o.Rate, out, text, "drain "+o.Region)
	}
	sum.Done = err == nil && !o.DryRun
	if cfg.Output == "json" {
		if jerr := writeJSON(out, sum); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		return fmt.Errorf("%w\nre-run the same command to finish: it recomputes what is left", err)
	}
	if text && !o.DryRun {
		fmt.Fprintf(out, "drain %s: done, %d moved; no partition is homed in %s\n", o.Region, sum.Applied, o.Region)
	}
	return nil
}

// ---- balance ----------------------------------------------------------

type balanceOptions struct {
	By     string // count or load
	Window time.Duration
	Rate   float64
	DryRun bool
}

func newBalanceCmd() *cobra.Command {
	var (
		o        balanceOptions
		byOrigin bool
		oo       = originOptions{Rules: placement.OriginRules{MinWrites: 100, MinShare: 0.6, Margin: 2, Cooldown: time.Hour, MaxMoves: 10}}
	)
	cmd := &cobra.Command{
		Use:   "balance",
		Short: "Plan (and apply) moves that even out the regions, or follow the writes",
		Long: `balance computes moves that even out the regions — by partition count, or by
load (state changes in the last --window, from the outbox) — prints the plan,
and applies it unless --dry-run is given. Like drain it is resumable: a new
run plans from the placements as they are now.

--by-origin instead moves each partition's home to the region its writes come
from, as the routers count them (per region, in Redis: BERTH_REDIS_URLS
region=url,… or BERTH_REDIS_URL for all). Hysteresis: the leading region must
have at least --min-writes writes in --window, at least --min-share of all of
them and --margin times the home region's own, and the partition must not have
moved within --cooldown; at most --max-moves per run, --rate per second.
--auto repeats this every --every until interrupted (opt-in automatic mode).`,
		Example: "  router shards balance --by load --dry-run\n  router shards balance --by count --rate 2\n" +
			"  router shards balance --by-origin --dry-run\n  router shards balance --by-origin --auto --every 1m",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadShardsConfig(cmd)
			if err != nil {
				return err
			}
			ctx := ctxOrBackground(cmd.Context())
			if !byOrigin {
				if cmd.Flags().Changed("auto") || cmd.Flags().Changed("min-writes") || cmd.Flags().Changed("min-share") ||
					cmd.Flags().Changed("margin") || cmd.Flags().Changed("cooldown") || cmd.Flags().Changed("max-moves") || cmd.Flags().Changed("every") {
					return cli.Usage(fmt.Errorf("--auto, --every, --min-writes, --min-share, --margin, --cooldown and --max-moves go with --by-origin"))
				}
				return runBalance(ctx, cfg, o, cmd.OutOrStdout())
			}
			var errs config.Errors
			if cmd.Flags().Changed("by") {
				errs.Add("--by and --by-origin: choose one")
			}
			oo.Window, oo.Rate, oo.DryRun = o.Window, o.Rate, o.DryRun
			if oo.Rate <= 0 {
				errs.Add("--rate: want a positive number of moves per second")
			}
			oo.validate(&errs)
			if oo.RedisURLs, err = redisURLs(); err != nil {
				errs.Add("%v", err)
			}
			if err := errs.Err(); err != nil {
				return cli.Usage(err)
			}
			return runBalanceByOrigin(ctx, cfg, oo, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.By, "by", "count", "what to even out: count or load")
	cmd.Flags().DurationVar(&o.Window, "window", 15*time.Minute, "with --by load or --by-origin: how far back writes count")
	cmd.Flags().Float64Var(&o.Rate, "rate", 2, "moves per second at most")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "print the plan, move nothing")
	cmd.Flags().BoolVar(&byOrigin, "by-origin", false, "move partitions to the region their writes come from")
	cmd.Flags().Int64Var(&oo.Rules.MinWrites, "min-writes", oo.Rules.MinWrites, "with --by-origin: writes the leading region needs in the window")
	cmd.Flags().Float64Var(&oo.Rules.MinShare, "min-share", oo.Rules.MinShare, "with --by-origin: the leading region's share of the partition's writes (> 0.5)")
	cmd.Flags().Float64Var(&oo.Rules.Margin, "margin", oo.Rules.Margin, "with --by-origin: the leader's writes over the home region's own (≥ 1)")
	cmd.Flags().DurationVar(&oo.Rules.Cooldown, "cooldown", oo.Rules.Cooldown, "with --by-origin: a partition moved this recently stays")
	cmd.Flags().IntVar(&oo.Rules.MaxMoves, "max-moves", oo.Rules.MaxMoves, "with --by-origin: moves per run at most (0: no cap)")
	cmd.Flags().BoolVar(&oo.Auto, "auto", false, "with --by-origin: plan and apply every --every until interrupted")
	cmd.Flags().DurationVar(&oo.Every, "every", time.Minute, "with --auto: time between runs")
	return cmd
}

func runBalance(ctx context.Context, cfg shardsConfig, o balanceOptions, out io.Writer) error {
	var errs config.Errors
	if !slices.Contains([]string{"count", "load"}, o.By) {
		errs.Add("--by %q: want count or load", o.By)
	}
	if o.By == "load" && o.Window < time.Second {
		errs.Add("--window: at least 1s")
	}
	if o.Rate <= 0 {
		errs.Add("--rate: want a positive number of moves per second")
	}
	if err := errs.Err(); err != nil {
		return cli.Usage(err)
	}
	store, closeDB, err := openPlacements(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	window := time.Duration(0)
	if o.By == "load" {
		window = o.Window
	}
	items, err := store.PartitionLoads(ctx, window)
	if err != nil {
		return fmt.Errorf("balance: %w", err)
	}
	plan := placement.BalancePlan(items, berth.Regions())
	text := cfg.Output == "text"
	if text {
		before := placement.Totals(items, berth.Regions())
		fmt.Fprintf(out, "balance by %s: %d moves\n", o.By, len(plan))
		for _, r := range berth.Regions() {
			fmt.Fprintf(out, "  %-9s %d\n", r, before[r])
		}
		if len(plan) > 0 {
			printPlan(out, plan, map[string]string{"count": "partitions", "load": "writes"}[o.By])
		}
	}
	sum := planSummary{Plan: plan, DryRun: o.DryRun}
	if sum.Plan == nil {
		sum.Plan = []placement.Move{}
	}
	if !o.DryRun {
		sum.Applied, err = applyPlan(ctx, store, plan, o.Rate, out, text, "balance")
	}
	sum.Done = err == nil && !o.DryRun
	if cfg.Output == "json" {
		if jerr := writeJSON(out, sum); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		return fmt.Errorf("%w\nre-run to continue: balance plans from the placements as they are now", err)
	}
	if text && o.DryRun {
		fmt.Fprintln(out, "dry run: nothing moved")
	}
	return nil
}
