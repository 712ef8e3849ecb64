package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/berthhq/berth/loadtest/internal/cpu"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/berthhq/berth/loadtest/internal/scenario"
	"github.com/berthhq/berth/loadtest/internal/seed"
	"github.com/spf13/cobra"
)

// scenarioCmd builds a scenario command with the common flags.
func scenarioCmd(use, short string, rate float64, dur time.Duration, workers int, needHTTP bool, defSLO report.SLO,
	flags func(*cobra.Command), run func(cmd *cobra.Command, e *scenario.Env, l scenario.Load) (*report.Report, error)) *cobra.Command {
	var c common
	cmd := &cobra.Command{Use: use, Short: short, RunE: func(cmd *cobra.Command, _ []string) error {
		slo, err := c.slo(defSLO)
		if err != nil {
			return err
		}
		e, cleanup, err := c.env(cmd.Context(), cmd, needHTTP)
		defer cleanup()
		if err != nil {
			return err
		}
		r, err := run(cmd, e, c.load())
		if err != nil {
			return err
		}
		return c.conclude(cmd.OutOrStdout(), r, slo)
	}}
	c.register(cmd, rate, dur, workers)
	if flags != nil {
		flags(cmd)
	}
	return cmd
}

func baselineCmd() *cobra.Command {
	var (
		o       scenario.Baseline
		cpuPIDs string
	)
	return scenarioCmd("baseline", "the same hold as raw SQL against the database, then through HTTP, with ratios",
		0, 10*time.Second, 16, true, report.SLO{},
		func(cmd *cobra.Command) {
			cmd.Flags().IntVar(&o.Hotels, "hotels", 60, "hotels to seed with COPY (spread inventory)")
			cmd.Flags().IntVar(&o.RoomTypes, "room-types", 2, "room types per hotel")
			cmd.Flags().IntVar(&o.Nights, "nights", 60, "nights per room type")
			cmd.Flags().StringVar(&o.Mode, "mode", "both", "both, sql or http")
			cmd.Flags().BoolVar(&o.Hot, "hot", false, "after the HTTP leg, a leg of holds of one room type's same night (hold_http_hot), and the ratio of the two")
			cmd.Flags().StringVar(&o.Entry, "entry", "home", "the router a hold enters through: home (its hotel's region) or other (the next region's: every hold crosses a region)")
			cmd.Flags().StringVar(&cpuPIDs, "cpu-pids", "", "name=pid,… of the platform's processes: each leg reports their CPU per hold (with the generator's)")
			cmd.Flags().BoolVar(&o.CPUPostgres, "cpu-postgres", false, "also account the PostgreSQL backends connected to the database (the server must be on this machine)")
		},
		func(cmd *cobra.Command, e *scenario.Env, l scenario.Load) (*report.Report, error) {
			o.Load = l
			procs, err := cpu.ParseProcs(cpuPIDs)
			if err != nil {
				return nil, fmt.Errorf("--cpu-pids: %w", err)
			}
			o.CPUProcs = procs
			return e.RunBaseline(cmd.Context(), o)
		})
}

func regionMoveCmd() *cobra.Command {
	var o scenario.RegionMove
	return scenarioCmd("region-move", "steady bookings while partitions are moved between regions (ops token)",
		200, 30*time.Second, 64, true, report.SLO{MaxErrorRate: f64(0.01)},
		func(cmd *cobra.Command) {
			registerMix(cmd, &o.Mix)
			cmd.Flags().DurationVar(&o.Every, "move-every", 2*time.Second, "move one random hotel this often")
		},
		func(cmd *cobra.Command, e *scenario.Env, l scenario.Load) (*report.Report, error) {
			o.Mix.Load = l
			o.Mix.ReadsPerWrite = min(o.Mix.ReadsPerWrite, 10) // writes are what a move can break
			return e.RunRegionMove(cmd.Context(), o)
		})
}

func soakCmd() *cobra.Command {
	var o scenario.Soak
	return scenarioCmd("soak", "steady mixed traffic for --duration; samples DB connections and the outbox backlog for drift",
		200, 10*time.Minute, 64, true, report.SLO{MaxErrorRate: f64(0.01)},
		func(cmd *cobra.Command) {
			registerMix(cmd, &o.Mix)
			cmd.Flags().DurationVar(&o.Sample, "sample-every", 5*time.Second, "gauge sampling period")
		},
		func(cmd *cobra.Command, e *scenario.Env, l scenario.Load) (*report.Report, error) {
			o.Mix.Load = l
			return e.RunSoak(cmd.Context(), o)
		})
}

func clinicOpeningCmd() *cobra.Command {
	var (
		o  scenario.ClinicOpening
		rc rushFlags
	)
	return scenarioCmd("clinic-opening", "the 07:00 spike: many patients, many doctors, the waiting room when present",
		500, 2*time.Minute, 256, true, report.SLO{Ops: map[string]report.OpSLO{"hold": {P99Ms: 500}}, MaxErrorRate: f64(0.01)},
		func(cmd *cobra.Command) {
			cmd.Flags().IntVar(&o.Doctors, "doctors", 20, "doctors (24 slots of 20 min each)")
			cmd.Flags().IntVar(&o.Patients, "patients", 2000, "patients arriving")
			cmd.Flags().StringVar(&o.Region, "home-region", "", "home region of the clinic")
			cmd.Flags().StringSliceVar(&o.Models, "patients-model", scenario.PatientModels,
				"patient models to run, each on a clinic of its own, in order (the last keeps the plain op names): "+
					"shipped = a slot of the first hour, then the first alternative offered; "+
					"window = one hold of any slot of the day, the earliest free first")
			cmd.Flags().BoolVar(&o.Connected, "connected", false,
				"patients are on the booking page when the day opens: each region's patients (up to --workers) load the first doctor's slots first, and their holds re-use those connections")
			rc.register(cmd, "each opening", &o.Settle)
		},
		func(cmd *cobra.Command, e *scenario.Env, l scenario.Load) (*report.Report, error) {
			o.Load = l
			rc.apply(e)
			return e.RunClinicOpening(cmd.Context(), o)
		})
}

func compareCmd() *cobra.Command {
	return &cobra.Command{Use: "compare A.json B.json", Short: "table of per-operation deltas between two reports", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := report.Load(args[0])
			if err != nil {
				return err
			}
			b, err := report.Load(args[1])
			if err != nil {
				return err
			}
			report.Compare(cmd.OutOrStdout(), a, b)
			return nil
		}}
}

func seedCmd() *cobra.Command {
	var (
		o       seed.Options
		dbURL   string
		regions string
	)
	cmd := &cobra.Command{Use: "seed", Short: "bulk catalog generation with COPY (hotels × room types × nights)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := common{dbURL: dbURL, dbConns: o.Workers + 1}
			e, cleanup, err := c.env(cmd.Context(), cmd, false)
			defer cleanup()
			if err != nil {
				return err
			}
			if e.DB == nil {
				return fmt.Errorf("seed needs --db or BERTH_DATABASE_URL")
			}
			o.Regions = strings.Split(regions, ",")
			o.Progress = os.Stderr
			total := int64(o.Hotels) * int64(o.RoomTypes) * int64(o.Nights)
			fmt.Fprintf(cmd.OutOrStdout(), "seeding %d hotels × %d room types × %d nights = %d inventory rows over %v with %d workers\n",
				o.Hotels, o.RoomTypes, o.Nights, total, o.Regions, o.Workers)
			res, err := seed.Hotels(cmd.Context(), e.DB, o)
			for _, t := range []string{"placements", "hotels", "room_types", "room_inventory"} {
				fmt.Fprintf(cmd.OutOrStdout(), "  %-15s %12d rows\n", t, res.Rows[t])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "took %.1f s: %.0f inventory rows/s\n", res.Seconds, res.InventoryRowsPerS)
			if err != nil {
				return err
			}
			if o.Clinics > 0 {
				cres, err := seed.Clinics(cmd.Context(), e.DB, o)
				if err != nil {
					return err
				}
				for _, t := range []string{"clinics", "doctors", "slots"} {
					fmt.Fprintf(cmd.OutOrStdout(), "  %-15s %12d rows\n", t, cres.Rows[t])
				}
				fmt.Fprintf(cmd.OutOrStdout(), "clinics took %.1f s\n", cres.Seconds)
			}
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&dbURL, "db", os.Getenv("BERTH_DATABASE_URL"), "database URL (BERTH_DATABASE_URL)")
	f.IntVar(&o.Hotels, "hotels", 500, "hotels (the articles' scale: 50000)")
	f.IntVar(&o.RoomTypes, "room-types", 5, "room types per hotel")
	f.IntVar(&o.Nights, "nights", 365, "nights of inventory from today")
	f.IntVar(&o.Rooms, "rooms", 20, "rooms per room type and night")
	f.IntVar(&o.Clinics, "clinics", 0, "clinics (the articles' scale: 200), when the clinic tables exist")
	f.IntVar(&o.Doctors, "doctors", 15, "doctors per clinic (the articles' chain: 3000 in all)")
	f.IntVar(&o.SlotDays, "slot-days", 30, "days of slots (24 a day per doctor)")
	f.StringVar(&regions, "regions", "us-east,eu-west,ap-south", "home regions, round-robin")
	f.IntVar(&o.Workers, "workers", 2, "parallel COPY connections")
	f.IntVar(&o.Chunk, "chunk", 100, "hotels per transaction")
	f.BoolVar(&o.Searchable, "searchable", false, "hotels worth searching: real cities, varied names, locations, amenities and prices (what `loadtest search` queries)")
	return cmd
}
