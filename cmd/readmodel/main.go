// Command readmodel is Berth's read side: it consumes the event stream into
// a per-guest view of every reservation and appointment across all
// partitions and regions, serves it to partners, and runs the consumers that
// act after a booking (notifications, refunds).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/berthhq/berth/internal/telemetry"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "readmodel:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode: 2 for usage and configuration errors, 1 for everything else
// (including `verify` finding differences).
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
		Use:   "readmodel",
		Short: "Berth's read model: per-guest view, partner API, notifications and refunds",
		Long: `readmodel consumes Berth's event stream (NATS JetStream) into a per-guest view of
every reservation and appointment, serves it to partners, and runs the notification
and refund consumers. Settings come from BERTH_* environment variables; flags override them.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
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
