package main

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/postgres"
)

// clinicConfig is the clinic part of `booking serve`'s settings.
type clinicConfig struct {
	// HoldTTL is how long a slot hold lasts (BERTH_SLOT_HOLD_TTL, 5m).
	HoldTTL time.Duration
	// RollingWeeks is how far ahead slots are kept materialized
	// (BERTH_SLOT_WINDOW_WEEKS, 8).
	RollingWeeks int
	// MaterializeInterval is how often the rolling job runs
	// (BERTH_SLOT_MATERIALIZE_INTERVAL, 1h).
	MaterializeInterval time.Duration
	// NoShowGrace is how long after a slot's end a confirmed patient who has
	// not arrived is marked a no-show (BERTH_CLINIC_NO_SHOW_GRACE, 30m).
	NoShowGrace time.Duration
}

func loadClinicConfig() (clinicConfig, error) {
	var (
		c    clinicConfig
		errs config.Errors
		err  error
	)
	c.HoldTTL, err = config.Duration("BERTH_SLOT_HOLD_TTL", postgres.DefaultSlotHoldTTL)
	errs.Check(err)
	c.RollingWeeks, err = config.Int("BERTH_SLOT_WINDOW_WEEKS", appointment.DefaultRollingWeeks)
	errs.Check(err)
	c.MaterializeInterval, err = config.Duration("BERTH_SLOT_MATERIALIZE_INTERVAL", time.Hour)
	errs.Check(err)
	c.NoShowGrace, err = config.Duration("BERTH_CLINIC_NO_SHOW_GRACE", appointment.DefaultNoShowGrace)
	errs.Check(err)
	if c.HoldTTL < time.Second {
		errs.Add("BERTH_SLOT_HOLD_TTL: at least 1s")
	}
	if c.RollingWeeks < 1 || c.RollingWeeks > 52 {
		errs.Add("BERTH_SLOT_WINDOW_WEEKS: want 1 to 52")
	}
	if c.MaterializeInterval < time.Second {
		errs.Add("BERTH_SLOT_MATERIALIZE_INTERVAL: at least 1s")
	}
	if c.NoShowGrace < time.Minute || c.NoShowGrace > 24*time.Hour {
		errs.Add("BERTH_CLINIC_NO_SHOW_GRACE: 1m to 24h")
	}
	return c, errs.Err()
}

// wireClinics wires the clinics part of the service: the clinic routes on
// the region's store, the rolling slot materialization job and the no-show
// job (every booking service runs it: each marks only appointments homed in
// its region, each under the appointment's lock, so runs side by side or
// twice change nothing more).
func wireClinics(ctx context.Context, w *wiring) error {
	cfg, err := loadClinicConfig()
	if err != nil {
		return cli.Usage(err)
	}
	clinics := postgres.NewClinicStore(w.store, cfg.HoldTTL)
	clinics.SetOfferTTL(w.cfg.OfferTTL)
	w.api.Clinics = clinics
	w.api.ClinicWaitlist = clinics
	w.clinics = clinics
	// Lapsed clinic waitlist offers (and lapsed holds of a slot somebody
	// waits for) are expired so their slots pass to the next waiter; the
	// expiry's event wakes the line (docs/adr/0015-clinic-waitlist.md).
	w.jobs = append(w.jobs, job{"expire-clinic-offers", 15 * time.Second, func(ctx context.Context) (int, error) {
		n, err := clinics.ExpireClinicOffers(ctx, 200)
		if err != nil {
			return n, fmt.Errorf("expire clinic offers: %w", err)
		}
		return n, nil
	}})
	w.jobs = append(w.jobs, job{"materialize-slots", cfg.MaterializeInterval, func(ctx context.Context) (int, error) {
		n, err := clinics.MaterializeRolling(ctx, time.Now(), cfg.RollingWeeks)
		if err != nil {
			return n, fmt.Errorf("materialize slots: %w", err)
		}
		return n, nil
	}})
	w.jobs = append(w.jobs, job{"mark-visit-no-shows", time.Minute, func(ctx context.Context) (int, error) {
		n, err := clinics.MarkNoShows(ctx, time.Now(), postgres.VisitNoShowOptions{Grace: cfg.NoShowGrace})
		if err != nil {
			return n, fmt.Errorf("mark visit no-shows: %w", err)
		}
		return n, nil
	}})
	w.log.Info("clinics wired", "slot_hold_ttl", cfg.HoldTTL.String(), "window_weeks", cfg.RollingWeeks,
		"no_show_grace", cfg.NoShowGrace.String())
	return nil
}
