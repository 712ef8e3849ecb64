package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/searchindex"
	"github.com/spf13/cobra"
)

func newSearchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "search", Short: "Operate the search index of running booking services", Args: cobra.NoArgs}
	var (
		urls     []string
		interval time.Duration
		noWait   bool
	)
	rebuild := &cobra.Command{
		Use:   "rebuild --url http://booking-replica:8080 [--url …]",
		Short: "Rebuild the search index of each service without downtime, showing progress",
		Long: `rebuild asks each booking service (every replica holds its own index: name
each one) to build a new search index from a snapshot of the catalog plus the
events that follow it, then swap it in behind the index's alias. Searches keep
being answered by the old index until the swap. Progress is printed until every
build is done; the exit code is 1 when one failed.

Environment: BERTH_TOKEN_SECRET (an ops token is minted with it).`,
		Example: `  booking search rebuild --url http://127.0.0.1:9080`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(urls) == 0 {
				return cli.Usage(errors.New("--url: at least one booking service"))
			}
			for _, u := range urls {
				if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
					return cli.Usage(fmt.Errorf("--url %q: want http(s)://host:port", u))
				}
			}
			if interval < 100*time.Millisecond {
				return cli.Usage(errors.New("--interval: at least 100ms"))
			}
			tokens, err := auth.New(config.Env("BERTH_TOKEN_SECRET", ""))
			if err != nil {
				return cli.Usage(fmt.Errorf("BERTH_TOKEN_SECRET: %w", err))
			}
			tok, err := tokens.Mint(berth.Principal{Subject: "booking-search-rebuild", Role: berth.RoleOps}, time.Hour)
			if err != nil {
				return err
			}
			return rebuildSearch(cmd.Context(), cmd.OutOrStdout(), urls, tok, interval, !noWait)
		},
	}
	rebuild.Flags().StringSliceVar(&urls, "url", nil, "base URL of a booking service (repeat for each replica)")
	rebuild.Flags().DurationVar(&interval, "interval", time.Second, "how often progress is shown")
	rebuild.Flags().BoolVar(&noWait, "no-wait", false, "start the rebuilds and return")
	cmd.AddCommand(rebuild)
	return cmd
}

type rebuildStatus struct {
	Progress searchindex.Progress `json:"progress"`
	Index    searchindex.Stats    `json:"index"`
}

// rebuildSearch starts a rebuild on every service, then shows each one's
// progress until all are done.
func rebuildSearch(ctx context.Context, out io.Writer, urls []string, token string, interval time.Duration, wait bool) error {
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(method, base string) (rebuildStatus, error) {
		var st rebuildStatus
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+"/v1/search/rebuild", nil)
		if err != nil {
			return st, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return st, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return st, err
		}
		if resp.StatusCode >= 300 {
			return st, fmt.Errorf("%s %s: %d %s", method, base, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return st, json.Unmarshal(body, &st)
	}
	for _, u := range urls {
		st, err := call(http.MethodPost, u)
		if err != nil {
			return fmt.Errorf("start rebuild: %w", err)
		}
		fmt.Fprintf(out, "%s: rebuild started (index holds %d hotels)\n", u, st.Index.Hotels)
	}
	if !wait {
		return nil
	}
	pending := map[string]bool{}
	for _, u := range urls {
		pending[u] = true
	}
	var failed []string
	t := time.NewTicker(interval)
	defer t.Stop()
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		for _, u := range urls {
			if !pending[u] {
				continue
			}
			st, err := call(http.MethodGet, u)
			if err != nil {
				fmt.Fprintf(out, "%s: %v\n", u, err)
				continue
			}
			p := st.Progress
			fmt.Fprintf(out, "%s: %-9s snapshot %d hotels, %d nights; indexed %d/%d\n", u, p.State, p.Hotels, p.Nights, p.Indexed, p.Total)
			switch p.State {
			case "done":
				fmt.Fprintf(out, "%s: done in %s; generation %s serves %d hotels\n", u,
					p.FinishedAt.Sub(p.StartedAt).Round(time.Millisecond), st.Index.Generation, st.Index.Hotels)
				delete(pending, u)
			case "failed":
				fmt.Fprintf(out, "%s: failed: %s (the previous index keeps serving)\n", u, p.Error)
				failed = append(failed, u)
				delete(pending, u)
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("rebuild failed on %s", strings.Join(failed, ", "))
	}
	return nil
}
