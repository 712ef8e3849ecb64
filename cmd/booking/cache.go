package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/spf13/cobra"
)

func newCacheCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cache", Short: "Operate the regional read cache", Args: cobra.NoArgs}
	cmd.AddCommand(newCacheWarmCmd())
	return cmd
}

// warmConfig is every setting of `booking cache warm`.
type warmConfig struct {
	Region      string
	DatabaseURL string
	Cache       cacheConfig
	Hotels      []string
	Clinics     []string
	Days        int
	TTL         time.Duration
}

func newCacheWarmCmd() *cobra.Command {
	var c warmConfig
	cmd := &cobra.Command{
		Use:   "warm --hotel ID… [--clinic ID…] [--days N]",
		Short: "Pre-load availability of partitions into the region's cache before an opening",
		Long: `warm loads the one-night availability of each hotel, and the slot list of every
doctor of each clinic, for the next --days days into the region's Redis, under the keys the booking service reads, so the first
wave of an opening is served from the cache. Entries are invalidated by writes
and events like any other; they expire after --ttl (default BERTH_CACHE_TTL), so
run it shortly before the opening or with a longer --ttl.

Environment: BERTH_REGION, BERTH_DATABASE_URL, BERTH_REDIS_URL, BERTH_CACHE_TTL,
BERTH_CACHE_TIMEOUT.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc, err := loadCacheConfig()
			if err != nil {
				return err
			}
			c.Cache = cc
			if c.Region == "" {
				c.Region = config.Env("BERTH_REGION", "")
			}
			c.DatabaseURL = config.Env("BERTH_DATABASE_URL", "")
			if err := c.validate(); err != nil {
				return cli.Usage(err)
			}
			return warm(cmd.Context(), c, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&c.Hotels, "hotel", nil, "hotel id to warm (repeatable)")
	f.StringSliceVar(&c.Clinics, "clinic", nil, "clinic id to warm (repeatable)")
	f.IntVar(&c.Days, "days", 7, "days ahead to warm, from today (UTC)")
	f.DurationVar(&c.TTL, "ttl", 0, "entry TTL (default BERTH_CACHE_TTL)")
	f.StringVar(&c.Region, "region", "", "region whose cache to warm (BERTH_REGION)")
	return cmd
}

func (c *warmConfig) validate() error {
	var errs []string
	if !berth.ValidRegion(c.Region) {
		errs = append(errs, fmt.Sprintf("BERTH_REGION (--region) = %q: want one of %v", c.Region, berth.Regions()))
	}
	if c.DatabaseURL == "" {
		errs = append(errs, "BERTH_DATABASE_URL: required")
	}
	if c.Cache.RedisURL == "" {
		errs = append(errs, "BERTH_REDIS_URL: required to warm a cache")
	}
	if len(c.Hotels)+len(c.Clinics) == 0 {
		errs = append(errs, "--hotel or --clinic: at least one partition")
	}
	for i, id := range c.Hotels {
		if !httpapi.ValidID(id) {
			errs = append(errs, fmt.Sprintf("--hotel %q: not an id", id))
		}
		c.Hotels[i] = strings.ToLower(id)
	}
	for i, id := range c.Clinics {
		if !httpapi.ValidID(id) {
			errs = append(errs, fmt.Sprintf("--clinic %q: not an id", id))
		}
		c.Clinics[i] = strings.ToLower(id)
	}
	if c.Days < 1 || c.Days > reservation.SaleWindowDays {
		errs = append(errs, fmt.Sprintf("--days: 1 to %d", reservation.SaleWindowDays))
	}
	if c.TTL == 0 {
		c.TTL = c.Cache.TTL
	}
	if c.TTL < time.Second || c.TTL > 24*time.Hour {
		errs = append(errs, "--ttl: 1s to 24h")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// warm loads the entries and reports what it did.
func warm(ctx context.Context, c warmConfig, stdout io.Writer) error {
	db, err := postgres.Open(ctx, c.DatabaseURL, postgres.Options{MaxConns: 4})
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	cache, err := rediscache.New(c.Cache.RedisURL, rediscache.Options{Region: c.Region, TTL: c.TTL, Timeout: c.Cache.Timeout})
	if err != nil {
		return cli.Usage(fmt.Errorf("BERTH_REDIS_URL: %w", err))
	}
	defer cache.Close()
	if err := cache.Ping(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	store := postgres.NewStore(db, c.Region, 0)
	today := reservation.DateOf(time.Now().UTC())
	for _, hotelID := range c.Hotels {
		var loaded, present int
		for d := range c.Days {
			stay := reservation.Stay{CheckIn: today.AddDays(d), CheckOut: today.AddDays(d + 1)}
			hit, err := httpapi.WarmAvailability(ctx, cache, store, hotelID, stay)
			if err != nil {
				return fmt.Errorf("warm hotel %s %s: %w", hotelID, stay.CheckIn, err)
			}
			if hit {
				present++
			} else {
				loaded++
			}
		}
		fmt.Fprintf(stdout, "hotel %s: %d nights loaded, %d already cached (region %s, ttl %s)\n", hotelID, loaded, present, c.Region, c.TTL)
	}
	clinics := postgres.NewClinicStore(store, 0)
	for _, clinicID := range c.Clinics {
		detail, err := clinics.GetClinicDetail(ctx, clinicID)
		if err != nil {
			return fmt.Errorf("clinic %s: %w", clinicID, err)
		}
		loc, err := time.LoadLocation(detail.Timezone)
		if err != nil {
			return fmt.Errorf("clinic %s: time zone %q: %w", clinicID, detail.Timezone, err)
		}
		// Days are the clinic's local days: the slot route is asked by local date.
		localToday := appointment.DateOf(time.Now().In(loc))
		var loaded, present int
		for _, doc := range detail.Doctors {
			for d := range c.Days {
				hit, err := httpapi.WarmSlots(ctx, cache, clinics, clinicID, doc.ID, localToday.AddDays(d))
				if err != nil {
					return fmt.Errorf("warm clinic %s doctor %s: %w", clinicID, doc.ID, err)
				}
				if hit {
					present++
				} else {
					loaded++
				}
			}
		}
		fmt.Fprintf(stdout, "clinic %s: %d doctors × %d days: %d slot lists loaded, %d already cached (region %s, ttl %s)\n",
			clinicID, len(detail.Doctors), c.Days, loaded, present, c.Region, c.TTL)
	}
	if s := cache.Stats(); s.Errors > 0 {
		return fmt.Errorf("redis: %d calls failed while warming; entries may be missing", s.Errors)
	}
	return nil
}
