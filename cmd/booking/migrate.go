package main

import (
	"fmt"

	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/spf13/cobra"
)

func newMigrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the schema migrations (and, on CockroachDB, the multi-region overlay)",
		Long: `migrate applies every pending migration of schema/ to BERTH_DATABASE_URL.
On CockroachDB it then applies the overlay in schema/cockroach/ (database
regions, REGIONAL BY ROW and GLOBAL localities). It is safe to run again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url := config.Env("BERTH_DATABASE_URL", "")
			if url == "" {
				return cli.Usage(fmt.Errorf("BERTH_DATABASE_URL: required"))
			}
			db, err := postgres.Open(cmd.Context(), url, postgres.Options{MaxConns: 2})
			if err != nil {
				return err
			}
			defer db.Close()
			res, err := postgres.Migrate(cmd.Context(), db)
			out := cmd.OutOrStdout()
			for _, m := range res.Applied {
				fmt.Fprintln(out, "applied", m)
			}
			for _, m := range res.Overlay {
				fmt.Fprintln(out, "applied overlay", m)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "schema up to date on %s (%d applied, %d overlay)\n", res.Engine, len(res.Applied), len(res.Overlay))
			return nil
		},
	}
}
