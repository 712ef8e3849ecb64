// Command router is Berth's edge, one per region: `router serve` proxies
// client requests to the partition's home region (writes) or the local
// region (reads), and `router shards …` is the operators' tool for the
// placement directory (list, move, drain, balance).
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
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(cli.ExitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "router",
		Short: "Berth's regional edge and the operators' placement tool",
		Long: `router serves the public API of one region, sending each partition's writes to
its home region and its reads to the local region, and manages placements:
  router serve --region R            the edge of one region
  router shards list|move|drain|balance
Settings come from BERTH_* environment variables; flags override them.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noArgs,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	root.AddCommand(newServeCmd(), newShardsCmd())
	return root
}

// noArgs refuses positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return cli.Usage(fmt.Errorf("%s: unexpected argument %q (see --help)", cmd.CommandPath(), args[0]))
	}
	return nil
}

// needSubcommand is the RunE of a command that only groups others.
func needSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return cli.Usage(fmt.Errorf("%s: unknown command %q (see --help)", cmd.CommandPath(), args[0]))
	}
	return cli.Usage(fmt.Errorf("%s: a subcommand is required (see --help)", cmd.CommandPath()))
}

// ctxOrBackground guards against commands run without ExecuteContext.
func ctxOrBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
