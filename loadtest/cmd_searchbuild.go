package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/searchindex"
	"github.com/spf13/cobra"
)

// searchBuildCmd times one search index build in this process, straight
// from the database, as a booking replica builds it at start: the figure
// to compare two versions of the build on one seeded catalog, apart from
// HTTP, the router and the rate steps of `loadtest search`.
func searchBuildCmd() *cobra.Command {
	var dbURL string
	cmd := &cobra.Command{Use: "search-build", Short: "time one search index build from the database (catalog and inventory snapshot, indexing), in process",
		Long: "search-build builds a search index from the database's catalog and inventory (what a booking replica does\n" +
			"at start and on POST /v1/search/rebuild) and reports when the catalog and the nights were read, the whole\n" +
			"build, what the index holds, its heap and the load average. Seed first: seed --searchable --hotels 50000 --room-types 2 --nights 30.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dbURL == "" {
				return fmt.Errorf("search-build needs --db or BERTH_DATABASE_URL")
			}
			ctx := cmd.Context()
			db, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 4})
			if err != nil {
				return err
			}
			defer db.Close()
			return timeBuild(ctx, cmd.OutOrStdout(), postgres.NewStore(db, "us-east", 0))
		}}
	cmd.Flags().StringVar(&dbURL, "db", os.Getenv("BERTH_DATABASE_URL"), "database URL (BERTH_DATABASE_URL)")
	return cmd
}

func timeBuild(ctx context.Context, out io.Writer, src searchindex.Source) error {
	x := searchindex.New(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	defer x.Close()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- x.Build(ctx, src) }()
	// The progress counters' last change tells when each read ended (to the
	// poll's 100 ms); "snapshot" ends when both have.
	var snapshot, catalogRead, nightsRead time.Duration
	var hotels, nights int
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			total := time.Since(start)
			s := x.Stats()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			load, _ := os.ReadFile("/proc/loadavg")
			fmt.Fprintf(out, "built in %.1f s: catalog read by %.1f s, nights read by %.1f s, snapshot state left at %.1f s\n",
				total.Seconds(), catalogRead.Seconds(), nightsRead.Seconds(), snapshot.Seconds())
			fmt.Fprintf(out, "index: %d hotels, %d room types, %d nights; heap after GC %.0f MiB; load average %s",
				s.Hotels, s.RoomTypes, s.Nights, float64(ms.HeapAlloc)/(1<<20), load)
			return nil
		case <-tick.C:
			p := x.Progress()
			if p.Hotels != hotels {
				hotels, catalogRead = p.Hotels, time.Since(start)
			}
			if p.Nights != nights {
				nights, nightsRead = p.Nights, time.Since(start)
			}
			if snapshot == 0 && p.State != "snapshot" && p.State != "starting" && p.State != "idle" {
				snapshot = time.Since(start)
			}
		}
	}
}
