package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/spf13/cobra"
)

// openStore opens the database named by BERTH_DATABASE_URL for the admin
// commands (partners, rebuild, verify).
func openStore(ctx context.Context) (*postgres.ReadModel, func(), error) {
	url := config.Env("BERTH_DATABASE_URL", "")
	if url == "" {
		return nil, nil, cli.Usage(errors.New("BERTH_DATABASE_URL: required"))
	}
	db, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 4})
	if err != nil {
		return nil, nil, fmt.Errorf("database: %w", err)
	}
	return postgres.NewReadModel(db), db.Close, nil
}

func newPartnersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "partners", Short: "Manage partner API keys (X-API-Key)", Args: cobra.NoArgs,
		PersistentPreRunE: cli.LocalEnv}
	create := &cobra.Command{
		Use:   "create --name NAME [--quiet]",
		Short: "Create a partner and print its API key (shown once; only its SHA-256 is stored)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, _ := cmd.Flags().GetString("name")
			quiet, _ := cmd.Flags().GetBool("quiet")
			if name == "" {
				return cli.Usage(errors.New("--name is required"))
			}
			return partnersCreate(cmd.Context(), cmd.OutOrStdout(), name, quiet)
		},
	}
	create.Flags().String("name", "", "partner name")
	create.Flags().Bool("quiet", false, "print only the key")
	list := &cobra.Command{
		Use: "list", Short: "List partners (never their keys)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			return partnersList(cmd.Context(), cmd.OutOrStdout(), asJSON)
		},
	}
	list.Flags().Bool("json", false, "print JSON")
	revoke := &cobra.Command{
		Use: "revoke ID|NAME", Short: "Revoke the keys of a partner", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return partnersRevoke(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func partnersCreate(ctx context.Context, out io.Writer, name string, quiet bool) error {
	store, closeDB, err := openStore(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	p, key, err := store.CreatePartner(ctx, name)
	if err != nil {
		return err
	}
	if quiet {
		_, err = fmt.Fprintln(out, key)
		return err
	}
	_, err = fmt.Fprintf(out, "partner %s (%s) created.\nAPI key (shown once, send it as X-API-Key):\n%s\n", p.Name, p.ID, key)
	return err
}

func partnersList(ctx context.Context, out io.Writer, asJSON bool) error {
	store, closeDB, err := openStore(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	ps, err := store.ListPartners(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(out).Encode(map[string]any{"partners": ps})
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tKEY\tCREATED\tREVOKED")
	for _, p := range ps {
		revoked := "-"
		if p.RevokedAt != nil {
			revoked = p.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\n", p.ID, p.Name, p.KeyPrefix, p.CreatedAt.UTC().Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

func partnersRevoke(ctx context.Context, out io.Writer, who string) error {
	store, closeDB, err := openStore(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	n, err := store.RevokePartner(ctx, who)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("no live partner %q", who)
	}
	_, err = fmt.Fprintf(out, "revoked %d key(s)\n", n)
	return err
}

func newRebuildCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild the view from the booking tables (safe while serve runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, closeDB, err := openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeDB()
			rep, err := store.Rebuild(cmd.Context())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "rebuilt: hotel=%d clinic=%d removed=%d\n", rep.Written["hotel"], rep.Written["clinic"], rep.Removed)
			return err
		},
	}
}

// errDifferences makes verify exit 1.
var errDifferences = errors.New("the view differs from the booking tables")

func newVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Compare the view with the booking tables; list differences, exit 1 when any",
		Args:  cobra.NoArgs,
		// Right after `make up`, BERTH_DATABASE_URL is in .local/env.
		PreRunE: cli.LocalEnv,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return verify(cmd.Context(), cmd.OutOrStdout())
		},
	}
}

func verify(ctx context.Context, out io.Writer) error {
	store, closeDB, err := openStore(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	diffs, err := store.Verify(ctx)
	if err != nil {
		return err
	}
	for _, d := range diffs {
		fmt.Fprintln(out, d.String())
	}
	fmt.Fprintf(out, "%d difference(s)\n", len(diffs))
	if len(diffs) > 0 {
		return errDifferences
	}
	return nil
}
