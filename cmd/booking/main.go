// Command booking is Berth's regional booking service: it owns the
// invariant, serves the hotel and clinic APIs for partitions homed in its
// region, expires lapsed holds, and applies the schema.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "booking:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode: 2 for usage and configuration errors, 1 for everything else.
func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// usageError marks bad flags, arguments or configuration: exit code 2, also
// when it arrives wrapped.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "booking",
		Short:         "Berth's regional booking service",
		Long:          "booking serves the hotel and clinic APIs of one region, owns the inventory invariant, and applies the schema.\nSettings come from BERTH_* environment variables; flags override them.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCmd(), newMigrateCmd(), newTokenCmd(), newSeedDemoCmd(), newVerifyCmd(), newCacheCmd())
	return root
}
