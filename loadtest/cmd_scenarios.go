package main

import (
	"time"

	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/berthhq/berth/loadtest/internal/scenario"
	"github.com/spf13/cobra"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "loadtest", Short: "Berth's SRE loadtest suite", SilenceUsage: true, SilenceErrors: true,
		Long: "Open-loop load against a running Berth platform (default: the routers in .local/env), with an\n" +
			"invariant audit of the database at the end of every run, JSON and HTML reports, and SLOs."}
	root.AddCommand(flashSaleCmd(), hotelMixCmd(), baselineCmd(), regionMoveCmd(), soakCmd(), clinicOpeningCmd(),
		compareCmd(), seedCmd(), strategiesCmd(), txcostCmd(), geoCmd(), originFollowCmd())
	return root
}

func flashSaleCmd() *cobra.Command {
	var (
		c      common
		o      scenario.FlashSale
		defSLO = report.SLO{Ops: map[string]report.OpSLO{"hold_lost": {P99Ms: 500}}, MaxErrorRate: f64(0.01)}
	)
	cmd := &cobra.Command{Use: "flash-sale", Short: "N clients race for the last K rooms of one hotel, through every region",
		RunE: func(cmd *cobra.Command, _ []string) error {
			slo, err := c.slo(defSLO)
			if err != nil {
				return err
			}
			e, cleanup, err := c.env(cmd.Context(), cmd, true)
			defer cleanup()
			if err != nil {
				return err
			}
			o.Load = c.load()
			r, err := e.RunFlashSale(cmd.Context(), o)
			if err != nil {
				return err
			}
			return c.conclude(cmd.OutOrStdout(), r, slo)
		}}
	c.register(cmd, 2000, time.Minute, 256)
	cmd.Flags().IntVar(&o.Clients, "clients", 1000, "N: clients racing")
	cmd.Flags().IntVar(&o.Rooms, "rooms", 1, "K: rooms left")
	cmd.Flags().StringVar(&o.Region, "home-region", "", "home region of the hotel (default: the first region)")
	return cmd
}

func hotelMixCmd() *cobra.Command {
	var (
		c      common
		o      scenario.HotelMix
		defSLO = report.SLO{Ops: map[string]report.OpSLO{"hold": {P99Ms: 100}, "availability": {P99Ms: 25}}, MaxErrorRate: f64(0.01)}
	)
	cmd := &cobra.Command{Use: "hotel-mix", Short: "search → availability → hold → confirm or abandon, ~100 reads per write, many hotels",
		RunE: func(cmd *cobra.Command, _ []string) error {
			slo, err := c.slo(defSLO)
			if err != nil {
				return err
			}
			e, cleanup, err := c.env(cmd.Context(), cmd, true)
			defer cleanup()
			if err != nil {
				return err
			}
			o.Load = c.load()
			r, err := e.RunHotelMix(cmd.Context(), o)
			if err != nil {
				return err
			}
			return c.conclude(cmd.OutOrStdout(), r, slo)
		}}
	c.register(cmd, 500, 30*time.Second, 128)
	registerMix(cmd, &o)
	return cmd
}

func registerMix(cmd *cobra.Command, o *scenario.HotelMix) {
	cmd.Flags().IntVar(&o.Hotels, "hotels", 24, "hotels to create (spread over the regions)")
	cmd.Flags().IntVar(&o.RoomTypes, "room-types", 2, "room types per hotel")
	cmd.Flags().IntVar(&o.Rooms, "rooms", 100, "rooms per room type and night")
	cmd.Flags().IntVar(&o.Window, "window", 60, "nights of inventory (from a week ahead)")
	cmd.Flags().Float64Var(&o.ReadsPerWrite, "reads-per-write", 100, "reads (search/availability) per write funnel")
	cmd.Flags().Float64Var(&o.ConfirmRatio, "confirm-ratio", 0.7, "share of holds confirmed (the rest are abandoned)")
}
