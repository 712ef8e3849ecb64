// Command booking is Berth's regional booking service: it owns the
// invariant, serves the hotel and clinic APIs for partitions homed in its
// region, expires lapsed holds, and applies the schema.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/berthhq/berth/internal/cli"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "booking:", err)
		os.Exit(cli.ExitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "booking",
		Short:         "Berth's regional booking service",
		Long:          "booking serves the hotel and clinic APIs of one region, owns the inventory invariant, and applies the schema.\nSettings come from BERTH_* environment variables; flags override them.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	root.AddCommand(newServeCmd(), newMigrateCmd(), newTokenCmd(), newSeedDemoCmd(), newVerifyCmd(), newCacheCmd(), newSearchCmd())
	return root
}
