// Command loadtest is the SRE suite that drives a running Berth platform:
// open-loop scenarios with HDR latency reports and an invariant audit at the
// end of every run, bulk catalog seeding, and the inventory-strategy table.
// `go run ./loadtest --help`; docs/ops/loadtest.md has the runbook.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}
