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
	if c.HoldTTL < time.Second {
		errs.Add("BERTH_SLOT_HOLD_TTL: at least 1s")
	}
	if c.RollingWeeks < 1 || c.RollingWeeks > 52 {
		errs.Add("BERTH_SLOT_WINDOW_WEEKS: want 1 to 52")
	}
	if c.MaterializeInterval < time.Second {
		errs.Add("BERTH_SLOT_MATERIALIZE_INTERVAL: at least 1s")
	}
	return c, errs.Err()
}

// wireClinics wires the clinics part of the service: the clinic routes on
// the region's store and the rolling slot materialization job.
func wireClinics(ctx context.Context, w *wiring) error {
	cfg, err := loadClinicConfig()
	if err != nil {
		return cli.Usage(err)
	}
	clinics := postgres.NewClinicStore(w.store, cfg.HoldTTL)
	w.api.Clinics = clinics
	w.jobs = append(w.jobs, job{"materialize-slots", cfg.MaterializeInterval, func(ctx context.Context) (int, error) {
		n, err := clinics.MaterializeRolling(ctx, time.Now(), cfg.RollingWeeks)
		if err != nil {
			return n, fmt.Errorf("materialize slots: %w", err)
		}
		return n, nil
	}})
	w.log.Info("clinics wired", "slot_hold_ttl", cfg.HoldTTL.String(), "window_weeks", cfg.RollingWeeks)
	return nil
}
