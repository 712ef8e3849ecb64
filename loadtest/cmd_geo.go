package main

import (
	"time"

	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/berthhq/berth/loadtest/internal/scenario"
	"github.com/spf13/cobra"
)

func geoCmd() *cobra.Command {
	var (
		c common
		o scenario.Geo
	)
	cmd := &cobra.Command{Use: "geo", Short: "clients in every region, local and foreign hotels: p50/p99 per (client region, home region) for reads and writes (run against `make up WAN=1`)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			slo, err := c.slo(report.SLO{MaxErrorRate: f64(0.01)})
			if err != nil {
				return err
			}
			e, cleanup, err := c.env(cmd.Context(), cmd, true)
			defer cleanup()
			if err != nil {
				return err
			}
			o.Load = c.load()
			r, err := e.RunGeo(cmd.Context(), o)
			if err != nil {
				return err
			}
			scenario.PrintGeo(cmd.OutOrStdout(), r)
			return c.conclude(cmd.OutOrStdout(), r, slo)
		}}
	c.register(cmd, 40, time.Minute, 64)
	cmd.Flags().IntVar(&o.HotelsPerRegion, "hotels-per-region", 4, "hotels homed in each region")
	cmd.Flags().IntVar(&o.Rooms, "rooms", 2000, "rooms per night (never sells out: every failure is a fault)")
	cmd.Flags().IntVar(&o.Window, "window", 30, "nights of inventory (from a week ahead)")
	cmd.Flags().Float64Var(&o.Foreign, "foreign", 0.3, "share of requests for hotels homed in another region than the client's")
	cmd.Flags().Float64Var(&o.ReadsPerWrite, "reads-per-write", 4, "availability reads per hold")
	return cmd
}

func originFollowCmd() *cobra.Command {
	var o scenario.OriginFollow
	return scenarioCmd("origin-follow", "a hotel homed in --home booked from --guests: holds before and after `router shards balance --by-origin` (run against `make up WAN=1`)",
		20, 0, 32, true, report.SLO{MaxErrorRate: f64(0.01)},
		func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&o.Home, "home", "us-east", "where the hotels are homed at the start")
			cmd.Flags().StringVar(&o.Guests, "guests", "eu-west", "where the abroad hotel's guests book from")
			cmd.Flags().DurationVar(&o.Phase, "phase", 30*time.Second, "load before and again after the balancer")
			cmd.Flags().StringVar(&o.Balance, "balance", ".local/bin/router shards balance --by-origin --window 5m --min-writes 20 --cooldown 0s",
				"the balancer's command line (it reads BERTH_DATABASE_URL and BERTH_REDIS_URL from the environment)")
		},
		func(cmd *cobra.Command, e *scenario.Env, l scenario.Load) (*report.Report, error) {
			o.Load = l
			return e.RunOriginFollow(cmd.Context(), o)
		})
}
