package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/postgres"
)

// warmStatements are the statements every connection of the pool plans
// as it opens (postgres.Options.Warm): the hold path's, and the intent of
// the development payment provider when it is the one in use (Stripe's is
// an HTTP call).
func warmStatements(cfg serveConfig) []string {
	if cfg.WarmConns == 0 {
		return nil
	}
	stmts := postgres.HoldStatements()
	if cfg.Payments.Kind != "stripe" {
		stmts = append(stmts, postgres.DevPaymentStatements()...)
	}
	return stmts
}

// errNotWarm is /readyz's answer until the warm-up has succeeded.
var errNotWarm = errors.New("connections not warmed yet")

// wireWarmUp opens BERTH_DB_WARM_CONNS connections with the hold path's
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
			return errNotWarm
		}
		return nil
	}})
	w.runners = append(w.runners, func(ctx context.Context) {
		if warmUntilDone(ctx, w.db, w.cfg.WarmConns, w.log, warmRetry{first: 100 * time.Millisecond, max: 5 * time.Second}) {
			warm.Store(true)
		}
	})
	return nil
}

// warmRetry is the backoff between warm-up attempts.
type warmRetry struct{ first, max time.Duration }

// warmUntilDone warms n connections of db, retrying with backoff until it
// succeeds (true) or ctx ends (false).
func warmUntilDone(ctx context.Context, db *postgres.DB, n int, log *slog.Logger, retry warmRetry) bool {
	wait := retry.first
	for attempt := 1; ; attempt++ {
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		st, err := db.Warm(actx, n)
		cancel()
		if err == nil {
			log.Info("database connections warmed", "conns", st.Conns, "statements", st.Statements,
				"took", time.Since(start).String(), "attempts", attempt)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		log.Warn("database warm-up failed; retrying (the service serves, not ready)", "attempt", attempt,
			"retry_in", wait.String(), "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, retry.max)
	}
}
