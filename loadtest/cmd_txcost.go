package main

import (
	"fmt"
	"os"
	"time"

	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/loadtest/internal/txcost"
	"github.com/spf13/cobra"
)

func txcostCmd() *cobra.Command {
	var (
		o     txcost.Options
		dbURL string
	)
	cmd := &cobra.Command{Use: "txcost",
		Short: "the write path's yardstick: the minimal hold transaction vs the store's own hold, spread and hot, with ratios",
		Long: "In one run on one scratch database (created and dropped): the minimal hold transaction (conditional UPDATE of\n" +
			"the nights + booking INSERT + outbox INSERT) by pgbench and by the Go driver, the store's hold transaction as SQL\n" +
			"(postgres.HoldScript: the statements Store.Hold sends) by the Go driver and by pgbench (unpipelined, with one\n" +
			"preliminary SELECT of the per-transaction values: 5 round trips where the store sends 2, conservative against\n" +
			"the store) and Store.Hold in-process, with hot-partition batching off\n" +
			"and on (\"store hold batched\") — on spread inventory and on\n" +
			"one hot row set. Prints the rates and each leg's ratio to the minimal transaction of the same shape\n" +
			"(and round: --rounds 2 runs the legs A B … B A and averages each leg's ratios over the rounds).\n\n" +
			"The Go legs run with the booking service's garbage-collector target (GOGC 400 unless GOGC is set), as\n" +
			"Store.Hold runs in the service.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Log = cmd.ErrOrStderr()
			// Store.Hold runs here as it runs in the booking service,
			// whose collector target this is (internal/config).
			config.ServiceGC()
			rows, err := txcost.Run(cmd.Context(), dbURL, o)
			if err != nil {
				return err
			}
			txcost.Print(cmd.OutOrStdout(), o, rows)
			return txcost.Verify(rows)
		}}
	f := cmd.Flags()
	f.StringVar(&dbURL, "db", os.Getenv("BERTH_TEST_DATABASE_URL"), "admin URL of the server; a scratch database is created and dropped (BERTH_TEST_DATABASE_URL)")
	f.IntVar(&o.Workers, "workers", 16, "concurrent transactions (pgbench clients)")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "per leg")
	f.IntVar(&o.Hotels, "hotels", 200, "hotels of the spread case")
	f.IntVar(&o.RoomTypes, "room-types", 5, "room types per hotel")
	f.IntVar(&o.Nights, "nights", 365, "nights loaded per room type")
	f.IntVar(&o.Stay, "stay", 3, "nights per hold")
	f.StringVar(&o.PgBench, "pgbench", "", "pgbench binary (default: PATH, then /usr/lib/postgresql/<15|16|17>/bin)")
	f.StringSliceVar(&o.Legs, "legs", nil, "run only legs whose \"<leg> <client>\" contains one of these, e.g. pgbench,in-process")
	f.BoolVar(&o.Keep, "keep", false, "keep the scratch database")
	f.IntVar(&o.Rounds, "rounds", 1, "run each shape's legs this many times, every other round in reverse order (A B … B A), so that a machine whose speed drifts during the run weighs on every leg alike; ratios are taken within each round and averaged")
	f.IntVar(&o.Lanes, "lanes", 0, fmt.Sprintf("hold lanes of the \"store hold batched\" leg: hold transactions of idle room types at once before holds group (0: the booking service's default, %d)", postgres.DefaultHoldLanes))
	f.IntVar(&o.Batch, "batch", 64, "largest batch of the \"store hold batched\" leg (holds of one room type per transaction)")
	return cmd
}
