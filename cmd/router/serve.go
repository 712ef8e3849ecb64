package main

import (
	"context"
	"io"

	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/routerd"
	"github.com/spf13/cobra"
)

// serveConfig is every setting of `router serve` (internal/routerd: the same
// router also runs inside a booking service, `booking serve --route`).
type serveConfig = routerd.Config

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the public API of one region",
		Long: `serve runs the edge of one region: writes go to the partition's home region,
reads to this region, /v1/guests/* to the read model.

Environment: BERTH_PPROF_ADDR (off; e.g. 127.0.0.1:6060: net/http/pprof on its own listener), BERTH_REGION, BERTH_HTTP_ADDR (:8080), BERTH_BOOKING_URLS
(region=url,…), BERTH_READMODEL_URL, BERTH_DATABASE_URL (the placement
directory), BERTH_NATS_URL (optional: follow placement.moved events),
BERTH_DIRECTORY_REFRESH (30s), BERTH_FOLLOW_MOVES_FOR (10s: how long a request
follows its partition's moves before 503), BERTH_MAX_BODY_BYTES (1048576),
BERTH_SHUTDOWN_TIMEOUT (20s), BERTH_LOG_FORMAT (json|text); BERTH_REDIS_URL,
BERTH_RATE_LIMITS (e.g. hotel_writes=200/s:400,client_reads=100/s,guest_holds=5/s),
BERTH_RATE_LIMIT_TIMEOUT (50ms: a decision that waits longer for Redis fails open),
BERTH_WAITING_ROOMS (JSON or @file), BERTH_WAITING_ROOM_KEYS, BERTH_TOKEN_SECRET
(required with waiting rooms), BERTH_TOKEN_MAX_TTL (24h), BERTH_TRUSTED_PROXIES
(CIDRs of the proxies in front of the router: only their X-Forwarded-For is
believed; unset, the peer address is the client).
GOGC (400 unless set: the collector's target; bound the heap with GOMEMLIMIT).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			var o routerd.Overrides
			o.Region, _ = f.GetString("region")
			o.Addr, _ = f.GetString("addr")
			o.BookingURLs, _ = f.GetString("booking-urls")
			o.ReadModelURL, _ = f.GetString("readmodel-url")
			cfg, err := routerd.Load(o)
			if err != nil {
				return err
			}
			cfg.GCPercent = config.ServiceGC()
			return run(ctxOrBackground(cmd.Context()), cfg, cmd.OutOrStdout(), nil)
		},
	}
	cmd.Flags().String("region", "", "region this router serves (BERTH_REGION)")
	cmd.Flags().String("addr", "", "listen address (BERTH_HTTP_ADDR, default :8080)")
	cmd.Flags().String("booking-urls", "", "region=url,… of the booking services (BERTH_BOOKING_URLS)")
	cmd.Flags().String("readmodel-url", "", "read model base URL (BERTH_READMODEL_URL)")
	return cmd
}

// run serves the router until ctx ends. When ready is not nil, the bound
// address is sent on it once the server listens.
func run(ctx context.Context, cfg serveConfig, stdout io.Writer, ready chan<- string) error {
	return routerd.Run(ctx, cfg, stdout, ready)
}
