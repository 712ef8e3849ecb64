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

	"github.com/berthhq/berth/internal/localenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Right after `make up` the platform's addresses and the development
	// token secret are in .local/env: read it (the environment wins), so
	// nobody has to source it first. Flags take their defaults from the
	// environment, so this runs before the command tree is built.
	if path, err := localenv.Load("."); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	} else if path != "" {
		fmt.Fprintln(os.Stderr, "loadtest: platform settings from", path)
	}
	root, prof := newRoot()
	err := root.ExecuteContext(ctx)
	if perr := prof.stop(); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}
