package bookingtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// Snapshot returns a digest of every row of every table of the database
// (the migrations' bookkeeping aside): two equal digests mean no request in
// between wrote, updated or deleted anything. Tables are listed from the
// catalog, so a table added by a later migration is covered without
// touching this function. Meant for the small databases of tests.
func Snapshot(ctx context.Context, db *postgres.DB) (string, error) {
	rows, err := dbtest.SQL(db).Query(ctx, `
		SELECT table_name::TEXT FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'goose%'
		ORDER BY table_name`)
	if err != nil {
		return "", fmt.Errorf("snapshot: list tables: %w", err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return "", fmt.Errorf("snapshot: list tables: %w", err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("snapshot: list tables: %w", err)
	}
	h := sha256.New()
	for _, name := range tables {
		// The names come from the catalog, not from input; quote them anyway.
		var digest, count string
		q := fmt.Sprintf(`SELECT COALESCE(md5(string_agg(t::TEXT, '|' ORDER BY t::TEXT)), ''), count(*)::TEXT FROM %q AS t`, name)
		if err := dbtest.SQL(db).QueryRow(ctx, q).Scan(&digest, &count); err != nil {
			return "", fmt.Errorf("snapshot %s: %w", name, err)
		}
		fmt.Fprintf(h, "%s:%s:%s\n", name, count, digest)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// MustSnapshot is Snapshot that fails the test on error.
func (e *Env) MustSnapshot() string {
	e.T.Helper()
	s, err := Snapshot(context.Background(), e.DB)
	if err != nil {
		e.T.Fatal(err)
	}
	return s
}
