package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/telemetry"
)

// bookingOps names the write routes counted in berth_booking_outcomes_total
// (label op); the code label comes from the answer (ok or the problem code).
var bookingOps = map[string]string{
	"POST /v1/hotels/{hotel_id}/reservations":                               "hotel.hold",
	"POST /v1/hotels/{hotel_id}/reservations/{reservation_id}/confirm":      "hotel.confirm",
	"POST /v1/hotels/{hotel_id}/reservations/{reservation_id}/cancel":       "hotel.cancel",
	"POST /v1/clinics/{clinic_id}/appointments":                             "clinic.hold",
	"POST /v1/clinics/{clinic_id}/appointments/{appointment_id}/confirm":    "clinic.confirm",
	"POST /v1/clinics/{clinic_id}/appointments/{appointment_id}/cancel":     "clinic.cancel",
	"POST /v1/clinics/{clinic_id}/appointments/{appointment_id}/reschedule": "clinic.reschedule",
	"POST /v1/placements/{kind}/{partition_id}/move":                        "placement.move",
}

// readyCheck is one dependency /readyz checks. Parts of the service that
// depend on NATS or Redis append theirs to wiring.ready.
type readyCheck struct {
	name  string
	check func(context.Context) error
}

// wireTelemetry wires what the service reports about itself: /metrics,
// the transaction retry counter, pool saturation, the outbox backlog, and
// /readyz over every dependency check. It runs after the other wire
// functions so their readiness checks are included.
func wireTelemetry(_ context.Context, w *wiring) error {
	tel, db := w.tel, w.db
	w.api.Metrics = tel.MetricsHandler()
	db.OnRetry(func(err error) { tel.TxRetry(context.Background(), err) })
	if err := tel.ObservePool(func() telemetry.PoolStats { return telemetry.PoolStats(db.PoolStats()) }); err != nil {
		return err
	}
	if err := tel.ObserveHoldBatches(func() telemetry.HoldBatchStats {
		return telemetry.HoldBatchStats(w.store.HoldBatchStats())
	}); err != nil {
		return err
	}
	if err := tel.ObserveOutbox(5*time.Second, func(ctx context.Context) (telemetry.OutboxStats, error) {
		n, age, err := db.OutboxBacklog(ctx, w.cfg.Region)
		return telemetry.OutboxStats{Backlog: n, OldestAge: age}, err
	}); err != nil {
		return err
	}
	checks := append([]readyCheck{{"database", db.Ping}}, w.ready...)
	w.api.Ready = func(ctx context.Context) error { return checkReady(ctx, checks) }
	return nil
}

// checkReady runs every check at once and names each one that failed.
func checkReady(ctx context.Context, checks []readyCheck) error {
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			if err := c.check(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", c.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// instrument wraps the API in the telemetry middleware: a span per request
// continuing the caller's trace, RED metrics per route, booking outcomes.
func instrument(tel *telemetry.Telemetry, api http.Handler) http.Handler {
	return tel.Middleware(tel.Outcomes(bookingOps, api))
}
