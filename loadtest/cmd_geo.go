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
