package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/spf13/cobra"
)

// errViolations makes `booking verify` exit 1 after printing its report.
var errViolations = errors.New("invariant violations found")

func newVerifyCmd() *cobra.Command {
	var (
		opts   postgres.VerifyOptions
		output string
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the inventory and slot invariants against the database (read-only)",
		Long: `verify reads BERTH_DATABASE_URL and checks, for every partition (or those
homed in --region):

  - every night: reserved equals the sum of the reservations occupying it (held,
    confirmed, checked in or out, a no-show's first night), within [0, sell_limit]
  - every occupied night exists
  - no room is assigned to two stays (or assigned and out of order) on one night; every
    assigned room-night belongs to a stay occupying it; every stay has its rooms every night
  - every night's out-of-order count matches its rooms out of order
  - no hotel hold lingers past its expiry longer than --stale-after (the sweeper runs)
  - every booking confirmed within --event-window has its confirmation event
  - at most one live appointment per slot; a live appointment and its slot point at
    each other (the slot names it and its guest, held or booked to match, and every
    held or booked slot names a live appointment on it)

Exit status: 0 clean, 1 violations found (or the check failed), 2 usage error.
Safe to run against production while traffic flows: it only reads.`,
		Example: `  booking verify
  booking verify --region eu-west --output json`,
		Args: cobra.NoArgs,
		// Right after `make up`, BERTH_DATABASE_URL is in .local/env.
		PreRunE: cli.LocalEnv,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return cli.Usage(fmt.Errorf("--output %q: want text or json", output))
			}
			if opts.Region != "" && !berth.ValidRegion(opts.Region) {
				return cli.Usage(fmt.Errorf("--region %q: want one of %v", opts.Region, berth.Regions()))
			}
			url := config.Env("BERTH_DATABASE_URL", "")
			if url == "" {
				return cli.Usage(errors.New("BERTH_DATABASE_URL: required"))
			}
			db, err := postgres.Open(cmd.Context(), url, postgres.Options{MaxConns: 2})
			if err != nil {
				return err
			}
			defer db.Close()
			started := time.Now()
			results, err := postgres.Verify(cmd.Context(), db, opts)
			if err != nil {
				return err
			}
			total := 0
			for _, r := range results {
				total += len(r.Violations)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(map[string]any{"ok": total == 0, "violations": total, "checks": results,
					"region": opts.Region, "duration_ms": time.Since(started).Milliseconds()}); err != nil {
					return err
				}
			} else {
				for _, r := range results {
					switch {
					case r.Skipped != "":
						fmt.Fprintf(w, "SKIP  %-34s %s (%s)\n", r.Name, r.Description, r.Skipped)
					case len(r.Violations) == 0:
						fmt.Fprintf(w, "ok    %-34s %s\n", r.Name, r.Description)
					default:
						fmt.Fprintf(w, "FAIL  %-34s %s: %d violation(s)\n", r.Name, r.Description, len(r.Violations))
						for _, v := range r.Violations {
							fmt.Fprintf(w, "        %s  %s\n", v.Partition, v.Detail)
						}
					}
				}
				fmt.Fprintf(w, "\n%d check(s), %d violation(s), %s\n", len(results), total, time.Since(started).Round(time.Millisecond))
			}
			if total > 0 {
				return errViolations
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Region, "region", "", "only partitions homed in this region")
	cmd.Flags().DurationVar(&opts.StaleHoldAfter, "stale-after", 5*time.Minute, "a hold still held this long past expiry is a violation")
	cmd.Flags().DurationVar(&opts.EventWindow, "event-window", 48*time.Hour, "confirmations within this window must have their event")
	cmd.Flags().IntVar(&opts.Limit, "limit", 100, "violations listed per check")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}
