package main

import (
	"os"
	"time"

	"github.com/berthhq/berth/loadtest/internal/strategies"
	"github.com/spf13/cobra"
)

func strategiesCmd() *cobra.Command {
	var o strategies.Options
	var dbURL string
	cmd := &cobra.Command{Use: "strategies", Short: "pessimistic FOR UPDATE vs optimistic version vs atomic conditional UPDATE, READ COMMITTED vs SERIALIZABLE, hot row vs spread",
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Log = cmd.ErrOrStderr()
			rows, err := strategies.Run(cmd.Context(), dbURL, o)
			if err != nil {
				return err
			}
			strategies.Print(cmd.OutOrStdout(), o, rows)
			return strategies.Verify(rows)
		}}
	f := cmd.Flags()
	f.StringVar(&dbURL, "db", os.Getenv("BERTH_TEST_DATABASE_URL"), "admin URL of the server; a scratch database is created and dropped (BERTH_TEST_DATABASE_URL)")
	f.IntVar(&o.Workers, "workers", 16, "concurrent transactions")
	f.DurationVar(&o.Duration, "duration", 3*time.Second, "per combination")
	f.IntVar(&o.SpreadRows, "spread-rows", 10000, "rows of the spread case")
	f.IntVar(&o.MaxRetries, "max-retries", 50, "retries per operation before it counts as failed")
	return cmd
}
