package main

import (
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/spf13/cobra"
)

func newTokenCmd() *cobra.Command {
	var (
		sub, role  string
		partitions []string
		ttl        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "token --sub ID --role guest|staff|admin|ops",
		Short: "Mint a bearer token signed with BERTH_TOKEN_SECRET",
		Long: `token mints a bearer token signed with BERTH_TOKEN_SECRET, valid for --ttl,
which may not exceed BERTH_TOKEN_MAX_TTL (default 24h): the services refuse
longer-lived tokens.`,
		Example: `  booking token --sub guest-42 --role guest
  booking token --sub desk-1 --role staff --partitions 6f1c…,9a2b…`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The services refuse tokens living longer than
			// BERTH_TOKEN_MAX_TTL, so minting one would only make a token
			// that never works.
			maxTTL, err := auth.ParseMaxLifetime(config.Env(auth.MaxLifetimeEnvVar, ""))
			if err != nil {
				return cli.Usage(err)
			}
			tokens, err := auth.New(config.Env("BERTH_TOKEN_SECRET", ""), auth.WithMaxLifetime(maxTTL))
			if err != nil {
				return cli.Usage(fmt.Errorf("BERTH_TOKEN_SECRET: %w", err))
			}
			if !berth.Role(role).Valid() {
				return cli.Usage(fmt.Errorf("--role %q: want guest, staff, admin or ops", role))
			}
			if ttl <= 0 || ttl > maxTTL {
				return cli.Usage(fmt.Errorf("--ttl %s: want more than 0 and at most %s (BERTH_TOKEN_MAX_TTL)", ttl, maxTTL))
			}
			tok, err := tokens.Mint(berth.Principal{Subject: sub, Role: berth.Role(role), Partitions: partitions}, ttl)
			if err != nil {
				return cli.Usage(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	cmd.Flags().StringVar(&sub, "sub", "", "subject: the guest id for guests")
	cmd.Flags().StringVar(&role, "role", "guest", "guest, staff, admin or ops")
	cmd.Flags().StringSliceVar(&partitions, "partitions", nil, "staff: partition ids they may act for")
	cmd.Flags().DurationVar(&ttl, "ttl", 12*time.Hour, "validity, at most BERTH_TOKEN_MAX_TTL")
	_ = cmd.MarkFlagRequired("sub")
	return cmd
}
