package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/origins"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/redis/go-redis/v9"
)

// originOptions are the flags of `router shards balance --by-origin`.
type originOptions struct {
	Window time.Duration
	Rules  placement.OriginRules
	Rate   float64
	DryRun bool
	// Auto re-plans and applies every Every until interrupted.
	Auto  bool
	Every time.Duration
	// RedisURLs: where each region's routers keep their tallies.
	RedisURLs map[string]string
}

func (o *originOptions) validate(errs *config.Errors) {
	if o.Window < origins.Bucket {
		errs.Add("--window: at least %s with --by-origin", origins.Bucket)
	}
	if o.Rules.MinShare <= 0.5 || o.Rules.MinShare > 1 {
		errs.Add("--min-share %.2f: want more than 0.5 (so a partition written evenly from two regions never flaps) and at most 1", o.Rules.MinShare)
	}
	if o.Rules.Margin < 1 {
		errs.Add("--margin %.2f: want at least 1", o.Rules.Margin)
	}
	if o.Rules.MinWrites < 1 {
		errs.Add("--min-writes: at least 1")
	}
	if o.Rules.Cooldown < 0 || o.Rules.MaxMoves < 0 {
		errs.Add("--cooldown and --max-moves may not be negative")
	}
	if o.Auto && o.Every < time.Second {
		errs.Add("--every: at least 1s")
	}
	if o.Auto && o.DryRun {
		errs.Add("--auto applies its plans; drop --dry-run")
	}
}

// redisURLs reads where each region's tallies live: BERTH_REDIS_URLS
// (region=url,…; production has one Redis per region) or BERTH_REDIS_URL
// for every region (one Redis, as locally).
func redisURLs() (map[string]string, error) {
	if v := config.Env("BERTH_REDIS_URLS", ""); v != "" {
		return config.RegionURLs("BERTH_REDIS_URLS", v)
	}
	one := config.Env("BERTH_REDIS_URL", "")
	if one == "" {
		return nil, fmt.Errorf("BERTH_REDIS_URLS or BERTH_REDIS_URL: required with --by-origin (the routers' write tallies)")
	}
	out := map[string]string{}
	for _, r := range berth.Regions() {
		out[r] = one
	}
	return out, nil
}

// runBalanceByOrigin plans moves of partitions to the region their writes
// come from and applies them (once, or every --every with --auto).
func runBalanceByOrigin(ctx context.Context, cfg shardsConfig, o originOptions, out io.Writer) error {
	store, closeDB, err := openPlacements(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	clients := map[string]*redis.Client{}
	byURL := map[string]*redis.Client{}
	for _, r := range berth.Regions() {
		u := o.RedisURLs[r]
		if u == "" {
			return cli.Usage(fmt.Errorf("no Redis URL for region %s", r))
		}
		if byURL[u] == nil {
			c, err := ratelimit.NewClient(u, 5*time.Second)
			if err != nil {
				return cli.Usage(err)
			}
			defer c.Close()
			byURL[u] = c
		}
		clients[r] = byURL[u]
	}
	for round := 1; ; round++ {
		err := balanceByOriginOnce(ctx, store, clients, o, cfg.Output, out)
		if !o.Auto {
			return err
		}
		if err != nil {
			// The automatic mode outlives a failed round: the next one
			// plans from the placements as they are then.
			fmt.Fprintf(out, "round %d failed: %v\n", round, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Every):
		}
	}
}

func balanceByOriginOnce(ctx context.Context, store *postgres.Placements, clients map[string]*redis.Client, o originOptions, output string, out io.Writer) error {
	now := time.Now()
	var counts []placement.OriginCount
	for _, r := range berth.Regions() {
		c, err := origins.Read(ctx, clients[r], r, o.Window, now)
		if err != nil {
			return fmt.Errorf("balance by origin: %w", err)
		}
		counts = append(counts, c...)
	}
	placements, err := store.ListPlacements(ctx, "", "")
	if err != nil {
		return fmt.Errorf("balance by origin: %w", err)
	}
	plan, decisions := placement.OriginPlan(counts, placements, o.Rules, now)
	text := output == "text"
	if text {
		fmt.Fprintf(out, "%s balance by origin (writes in the last %s): %d partitions written, %d moves\n",
			now.UTC().Format(time.RFC3339), o.Window, len(decisions), len(plan))
		if len(decisions) > 0 {
			printDecisions(out, decisions)
		}
	}
	sum := planSummary{Plan: plan, DryRun: o.DryRun}
	if sum.Plan == nil {
		sum.Plan = []placement.Move{}
	}
	if !o.DryRun {
		sum.Applied, err = applyPlan(ctx, store, plan, o.Rate, out, text, "balance by origin")
	}
	sum.Done = err == nil && !o.DryRun
	if output == "json" {
		if jerr := writeJSON(out, struct {
			planSummary
			Decisions []placement.OriginDecision `json:"decisions"`
		}{sum, decisions}); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		return fmt.Errorf("%w\nre-run to continue: balance plans from the placements and tallies as they are now", err)
	}
	if text && o.DryRun {
		fmt.Fprintln(out, "dry run: nothing moved")
	}
	return nil
}

func printDecisions(out io.Writer, decisions []placement.OriginDecision) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tPARTITION\tHOME\tWRITES BY ORIGIN\tLEADER\tDECISION")
	for _, d := range decisions {
		var parts []string
		for _, r := range berth.Regions() {
			if n := d.Writes[r]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", r, n))
			}
		}
		verdict := "stay: " + d.Why
		if d.Move {
			verdict = "move to " + d.Leader
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Kind, d.PartitionID, d.Home, strings.Join(parts, " "), d.Leader, verdict)
	}
	_ = tw.Flush()
}
