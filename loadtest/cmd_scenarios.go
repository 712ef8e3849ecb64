package main

import (
	"fmt"
	"time"

	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/cpu"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/berthhq/berth/loadtest/internal/scenario"
	"github.com/spf13/cobra"
)

// newRoot builds the command tree; the caller stops the CPU profile
// (--cpuprofile) once the command has returned, however it ended.
func newRoot() (*cobra.Command, *cpuProfile) {
	root := &cobra.Command{Use: "loadtest", Short: "Berth's SRE loadtest suite", SilenceUsage: true, SilenceErrors: true,
		Long: "Open-loop load against a running Berth platform (default: the routers in .local/env), with an\n" +
			"invariant audit of the database at the end of every run, JSON and HTML reports, and SLOs."}
	root.AddCommand(checkInMorningCmd())
	root.AddCommand(flashSaleCmd(), hotelMixCmd(), baselineCmd(), regionMoveCmd(), soakCmd(), clinicOpeningCmd(),
		compareCmd(), seedCmd(), strategiesCmd(), txcostCmd(), geoCmd(), originFollowCmd(), searchCmd(), searchBuildCmd())
	prof := &cpuProfile{}
	prof.register(root)
	return root, prof
}

func checkInMorningCmd() *cobra.Command {
	var (
		c      common
		o      scenario.CheckInMorning
		defSLO = report.SLO{Ops: map[string]report.OpSLO{"check_in": {P99Ms: 500}}, MaxErrorRate: f64(0.01)}
	)
	cmd := &cobra.Command{Use: "check-in-morning", Short: "a hotel's arrivals checked in in parallel under overbooking; the desks walk the guests rooms ran out for",
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
			r, err := e.RunCheckInMorning(cmd.Context(), o)
			if err != nil {
				return err
			}
			return c.conclude(cmd.OutOrStdout(), r, slo)
		}}
	c.register(cmd, 200, 5*time.Minute, 32)
	cmd.Flags().IntVar(&o.Arrivals, "arrivals", 200, "confirmed arrivals today")
	cmd.Flags().IntVar(&o.OverbookingPct, "overbooking-pct", 10, "overbooking of the standard rooms (arrivals = rooms × (100 + pct) / 100)")
	cmd.Flags().StringVar(&o.Region, "home-region", "", "home region of the hotels (default: the first region)")
	cmd.Flags().DurationVar(&o.SettleWait, "settle-wait", time.Minute, "how long to wait for the relocations (the saga) to settle")
	return cmd
}

func flashSaleCmd() *cobra.Command {
	var (
		c      common
		o      scenario.FlashSale
		rc     rushFlags
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
			rc.apply(e)
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
	cmd.Flags().BoolVar(&o.Connected, "connected", false,
		"clients are on the sale's page when it opens: each region's clients (up to --workers) load the room's availability first, and their holds re-use those connections")
	rc.register(cmd, "the sale", &o.Settle)
	return cmd
}

// rushFlags is what the rush scenarios (flash-sale, clinic-opening) share:
// the CPU accounting of their burst (--cpu-pids and --cpu-postgres as
// baseline's) and --settle, checked before the command reaches for the
// platform.
type rushFlags struct {
	pids     string
	postgres bool
	procs    []cpu.Proc
}

func (rc *rushFlags) register(cmd *cobra.Command, burst string, settle *time.Duration) {
	cmd.Flags().DurationVar(settle, "settle", scenario.DefaultSettle, "open "+burst+" only once its setup has been relayed to every region, "+
		"and this long after, as a real rush sells what was set up beforehand (0: the moment the setup returns)")
	cmd.Flags().StringVar(&rc.pids, "cpu-pids", "", "name=pid,… of the platform's processes: the report gives their CPU during "+burst+" alone, per request (with the generator's)")
	cmd.Flags().BoolVar(&rc.postgres, "cpu-postgres", false, "also account the PostgreSQL backends connected to the database (the server must be on this machine)")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if err := scenario.CheckSettle(*settle); err != nil {
			return err
		}
		procs, err := cpu.ParseProcs(rc.pids)
		if err != nil {
			return fmt.Errorf("--cpu-pids: %w", err)
		}
		rc.procs = procs
		return nil
	}
}

// apply sets the accounting on the scenario's environment.
func (rc *rushFlags) apply(e *scenario.Env) { e.CPUProcs, e.CPUPostgres = rc.procs, rc.postgres }

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

func searchCmd() *cobra.Command {
	var (
		c       common
		o       scenario.Search
		indexes string
	)
	cmd := &cobra.Command{Use: "search", Short: "seed a searchable catalog, rebuild the search indexes, find the highest search rate with p99 under the objective, measure the lag",
		Long: "search seeds --hotels searchable hotels with COPY (progress shown), rebuilds the search index of every\n" +
			"booking service (--indexes; the seed writes behind the events' back) and records its build time and\n" +
			"memory, then sends a realistic mix of searches (free text with typos, cities by their English names,\n" +
			"city with dates and guests, a point and a radius sorted by distance, price order, amenities, a second\n" +
			"page by cursor) through the entry points (routers) at each --rates arrival rate (open loop) for --step,\n" +
			"until search p99 reaches --p99-ms: the last rate that held is the figure. Last, hotels are created and\n" +
			"renamed and searched for until found: the lag after a catalog change.",
		Example: "  loadtest search --hotels 50000 --rates 10,20,40,80,160 --step 20s",
		RunE: func(cmd *cobra.Command, _ []string) error {
			slo, err := c.slo(report.SLO{})
			if err != nil {
				return err
			}
			e, cleanup, err := c.env(cmd.Context(), cmd, true)
			defer cleanup()
			if err != nil {
				return err
			}
			if indexes == "" {
				indexes = c.bookings
			}
			if indexes != "" {
				all, err := client.ParseTargets(indexes)
				if err != nil {
					return fmt.Errorf("--indexes: %w", err)
				}
				o.Indexes = client.Targets{URL: map[string]string{}, Kind: map[string]string{}}
				for _, region := range all.Regions {
					if client.Healthy(cmd.Context(), all.URL[region]) {
						o.Indexes.Regions = append(o.Indexes.Regions, region)
						o.Indexes.URL[region], o.Indexes.Kind[region] = all.URL[region], "booking"
					}
				}
			}
			o.Workers = c.workers
			r, err := e.RunSearch(cmd.Context(), o)
			if err != nil {
				return err
			}
			return c.conclude(cmd.OutOrStdout(), r, slo)
		}}
	c.register(cmd, 0, 0, 256)
	_ = cmd.Flags().MarkHidden("rate")
	_ = cmd.Flags().MarkHidden("duration")
	f := cmd.Flags()
	f.IntVar(&o.Hotels, "hotels", 50000, "searchable hotels to seed (the articles' scale: 50000)")
	f.IntVar(&o.RoomTypes, "room-types", 2, "room types per hotel")
	f.IntVar(&o.Nights, "nights", 30, "nights of inventory from today")
	f.IntVar(&o.Rooms, "rooms", 20, "rooms per room type and night")
	f.BoolVar(&o.NoSeed, "no-seed", false, "search the catalog seeded before (same --hotels, by seed --searchable) instead of seeding")
	f.BoolVar(&o.NoRebuild, "no-rebuild", false, "search the indexes as an earlier run left them (no build time or memory figures)")
	f.StringVar(&indexes, "indexes", "", "region=url list of booking services whose search indexes are rebuilt and measured (default: --bookings that answer)")
	f.Float64SliceVar(&o.Rates, "rates", []float64{10, 20, 40, 80, 160, 320}, "arrival rates (searches/s) tried in order")
	f.DurationVar(&o.Step, "step", 20*time.Second, "how long each rate runs")
	f.Float64Var(&o.P99Ms, "p99-ms", 100, "the search p99 objective (ms)")
	f.Float64Var(&o.MaxErrorRate, "step-error-rate", 0.01, "the most errors a rate may have and still hold")
	f.IntVar(&o.LagSamples, "lag-samples", 20, "hotels created and renamed to measure the lag")
	return cmd
}
