package bookingtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

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
	// One statement, one round trip: each table's rows as text, sorted,
	// digested, with the table's name and row count.
	parts := make([]string, len(tables))
	for i, name := range tables {
		// The names come from the catalog, not from input; quoted anyway.
		parts[i] = fmt.Sprintf(`SELECT %s || ':' || count(*) || ':' || COALESCE(md5(string_agg(t::TEXT, '|' ORDER BY t::TEXT)), '') AS d FROM %s AS t`,
			quoteLiteral(name), quoteIdent(name))
	}
	var all string
	q := `SELECT string_agg(d, E'\n' ORDER BY d) FROM (` + strings.Join(parts, " UNION ALL ") + `) AS s`
	if err := dbtest.SQL(db).QueryRow(ctx, q).Scan(&all); err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	sum := sha256.Sum256([]byte(all))
	return hex.EncodeToString(sum[:]), nil
}

func quoteIdent(s string) string   { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// MustSnapshot is Snapshot that fails the test on error.
func (e *Env) MustSnapshot() string {
	e.T.Helper()
	s, err := Snapshot(context.Background(), e.DB)
	if err != nil {
		e.T.Fatal(err)
	}
	return s
}
