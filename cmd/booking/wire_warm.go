package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/postgres"
)

// warmStatements are the statements every connection of the pool plans
// as it opens (postgres.Options.Warm): the hold path's and the appointment
// hold path's. A prepaid hold's payment intent sends none (the development
// provider's is a signed token, ADR 0027; Stripe's an HTTP call).
func warmStatements(cfg serveConfig) []string {
	if cfg.WarmConns == 0 {
		return nil
	}
	return postgres.WarmStatements()
}

// wireWarmUp opens BERTH_DB_WARM_CONNS connections with the hold paths'
// statements planned on each before /readyz reports ready, so that a
// service just started (a deploy, the morning's first sale) answers its
// first holds as fast as its later ones (docs/PERFORMANCE.md, "A fresh
// platform's first sale"). A failure — the database briefly away, or its
// schema not migrated yet — is logged and retried; it is never fatal, and
// the service serves meanwhile (only colder), but does not claim ready.
func wireWarmUp(_ context.Context, w *wiring) error {
	if w.cfg.WarmConns == 0 {
		return nil
	}
	var warm atomic.Bool
	w.ready = append(w.ready, readyCheck{"database warm-up", func(context.Context) error {
		if !warm.Load() {
			return postgres.ErrNotWarm
		}
		return nil
	}})
	w.runners = append(w.runners, func(ctx context.Context) {
		if w.db.WarmUntilDone(ctx, w.cfg.WarmConns, warmRetry, postgres.LogWarmUp(w.log)) {
			warm.Store(true)
		}
	})
	return nil
}

// warmRetry is the backoff between warm-up attempts.
var warmRetry = postgres.WarmRetry{First: 100 * time.Millisecond, Max: 5 * time.Second}
