// Command wan is the simulated wide-area network of the local stack
// (`make up WAN=1`): an in-process Toxiproxy with one proxy between every
// router and each other region's booking service and the read model, each
// delaying both directions by half the pair's round-trip time (internal/wan)
// with jitter. The database stays local; docs/ops/wan.md says how
// production gets the same shape.
//
//	wan serve                 run the proxies (and the Toxiproxy API) until stopped
//	wan env --region R        the router settings of region R, as VAR=value lines
//	wan plan                  the links, their ports and delays
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/wan"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wan:", err)
		os.Exit(cli.ExitCode(err))
	}
}

// settings are the stack's URLs (from .local/env) and the proxies' base port.
type settings struct {
	bookings  map[string]string
	readModel string
	basePort  int
}

func load(basePort int) (settings, []wan.Link, error) {
	s := settings{readModel: config.Env("BERTH_READMODEL_URL", ""), basePort: basePort}
	var err error
	if s.bookings, err = config.RegionURLs("BERTH_BOOKING_URLS", config.Env("BERTH_BOOKING_URLS", "")); err != nil {
		return s, nil, cli.Usage(err)
	}
	links, err := wan.Plan(berth.Regions(), s.bookings, s.readModel, basePort)
	if err != nil {
		return s, nil, cli.Usage(err)
	}
	return s, links, nil
}

func newRoot() *cobra.Command {
	var basePort int
	root := &cobra.Command{Use: "wan", Short: "The simulated WAN between the local stack's regions (Toxiproxy)",
		Long: `wan puts realistic inter-region delays between each router and the other
regions' services: us-east–eu-west 75 ms, us-east–ap-south 190 ms,
eu-west–ap-south 120 ms round trip, ±10% jitter. It reads BERTH_BOOKING_URLS and
BERTH_READMODEL_URL (source .local/env). Exit codes: 0 ok, 1 failure, 2 usage.`,
		SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().IntVar(&basePort, "base-port", 9700, "proxy ports are base+10·router+service (see `wan plan`)")
	root.AddCommand(&cobra.Command{Use: "serve", Short: "Run the proxies until interrupted", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, _ := cmd.Flags().GetString("api")
			_, links, err := load(basePort)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), links, api)
		}})
	root.Commands()[0].Flags().String("api", "127.0.0.1:8474", "address of the Toxiproxy HTTP API (inspect or change the toxics live); empty: none")
	envCmd := &cobra.Command{Use: "env", Short: "Print the router settings of one region (VAR=value per line)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			region, _ := cmd.Flags().GetString("region")
			if !berth.ValidRegion(region) {
				return cli.Usage(fmt.Errorf("--region %q: want one of %v", region, berth.Regions()))
			}
			s, links, err := load(basePort)
			if err != nil {
				return err
			}
			urls, rm := wan.RouterURLs(links, region, s.bookings, s.readModel)
			var parts []string
			for _, r := range berth.Regions() {
				parts = append(parts, r+"="+urls[r])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "BERTH_BOOKING_URLS=%s\n", strings.Join(parts, ","))
			if rm != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "BERTH_READMODEL_URL=%s\n", rm)
			}
			return nil
		}}
	envCmd.Flags().String("region", "", "the router's region")
	root.AddCommand(envCmd)
	root.AddCommand(&cobra.Command{Use: "plan", Short: "List the links with their ports and delays", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, links, err := load(basePort)
			if err != nil {
				return err
			}
			if o, _ := cmd.Flags().GetBool("json"); o {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(links)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "LINK\tLISTEN\tUPSTREAM\tRTT\tJITTER (each way)")
			for _, l := range links {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t±%s\n", l.Name, l.Listen, l.Upstream, 2*l.OneWay, l.Jitter)
			}
			return tw.Flush()
		}})
	root.Commands()[len(root.Commands())-1].Flags().Bool("json", false, "JSON output")
	return root
}

// serve starts one proxy per link with a latency toxic on each direction,
// and the Toxiproxy API when api is set, until ctx ends.
func serve(ctx context.Context, links []wan.Link, api string) error {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	for _, l := range links {
		px := toxiproxy.NewProxy(srv, l.Name, l.Listen, l.Upstream)
		if err := srv.Collection.Add(px, true); err != nil {
			return fmt.Errorf("proxy %s on %s: %w", l.Name, l.Listen, err)
		}
		for _, stream := range []string{"upstream", "downstream"} {
			body := fmt.Sprintf(`{"name":"wan_%s","type":"latency","stream":%q,"toxicity":1.0,"attributes":{"latency":%d,"jitter":%d}}`,
				stream, stream, l.OneWay.Milliseconds(), l.Jitter.Milliseconds())
			if _, err := px.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
				return fmt.Errorf("latency on %s: %w", l.Name, err)
			}
		}
		fmt.Printf("%s %s → %s: %s ± %s each way\n", time.Now().UTC().Format(time.RFC3339), l.Listen, l.Upstream, l.OneWay, l.Jitter)
	}
	if api != "" {
		host, port, err := net.SplitHostPort(api)
		if err != nil {
			return cli.Usage(fmt.Errorf("--api %q: %w", api, err))
		}
		go srv.Listen(host, port) // exits the process if the port is taken
	}
	<-ctx.Done()
	for _, px := range srv.Collection.Proxies() {
		px.Stop()
	}
	return nil
}
