// Command readmodel is Berth's read side: it consumes the event stream into
// a per-guest view of every reservation and appointment across all
// partitions and regions, serves it to partners, and runs the consumers that
// act after a booking (notifications, refunds).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/telemetry"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "readmodel:", err)
		os.Exit(cli.ExitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "readmodel",
		Short: "Berth's read model: per-guest view, partner API, notifications and refunds",
		Long: `readmodel consumes Berth's event stream (NATS JetStream) into a per-guest view of
every reservation and appointment, serves it to partners, and runs the notification
and refund consumers. Settings come from BERTH_* environment variables; flags override them.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	root.AddCommand(newServeCmd(), newPartnersCmd(), newRebuildCmd(), newVerifyCmd())
	return root
}

func newLogger(w io.Writer, format string) *slog.Logger {
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, nil)
	} else {
		h = slog.NewJSONHandler(w, nil)
	}
	return slog.New(telemetry.LogHandler(h)).With("service", "readmodel")
}
