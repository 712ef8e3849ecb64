package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/berthhq/berth/schema"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// MigrationResult reports what Migrate applied.
type MigrationResult struct {
	Applied []string
	Overlay []string
	Engine  Engine
}

// Migrate applies the portable migrations and, on CockroachDB, the overlay.
//
// Nothing guards against two migrators at once: advisory locks are no-ops
// on CockroachDB, so no session locker is configured, and goose's version
// table (goose_db_version) has no unique constraint on the version, so two
// racing migrators could both run a step and both record it. Run migrations
// from one place only: the migration Job (deploy/k8s, `booking migrate`),
// before the services start.
func Migrate(ctx context.Context, db *DB) (MigrationResult, error) {
	res := MigrationResult{Engine: db.Engine}
	sqlDB := stdlib.OpenDBFromPool(db.pool)
	defer sqlDB.Close()
	// Out-of-order steps are applied too: parallel work lands migrations whose
	// numbers sort before ones already applied on long-lived databases.
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, schema.Migrations, goose.WithAllowOutofOrder(true),
		goose.WithGoMigrations(postgresOnly(db.Engine, 960, outboxCreatedBRIN, `DROP INDEX IF EXISTS outbox_created_brin`),
			postgresOnly(db.Engine, 961, roomInventoryFillfactor, `ALTER TABLE room_inventory RESET (fillfactor)`),
			postgresOnly(db.Engine, 962, outboxPayloadJSON, `ALTER TABLE outbox ALTER COLUMN payload TYPE JSONB`)))
	if err != nil {
		return res, fmt.Errorf("load migrations: %w", err)
	}
	results, err := p.Up(ctx)
	for _, r := range results {
		res.Applied = append(res.Applied, r.Source.Path)
	}
	if err != nil {
		return res, fmt.Errorf("apply migrations: %w", err)
	}
	if db.Engine == EngineCockroach {
		if res.Overlay, err = applyOverlay(ctx, sqlDB, schema.Cockroach); err != nil {
			return res, err
		}
	}
	return res, nil
}

// outboxCreatedBRIN lets the outbox's prune find the expired rows without
// reading the whole table (Store.PruneOutbox). BRIN keeps one entry per
// range of table blocks — created_at follows the insert order — so an
// insert almost never writes to it (docs/PERFORMANCE.md). CockroachDB has
// no BRIN; its overlay expires sent rows with row-level TTL instead
// (schema/cockroach/00960_outbox_ttl.sql).
const outboxCreatedBRIN = `CREATE INDEX IF NOT EXISTS outbox_created_brin ON outbox USING BRIN (created_at)`

// roomInventoryFillfactor leaves a fifth of every page of the inventory
// free for the new versions of its rows. Every hold, confirm, cancel and
// expiry updates a night row, and none changes an indexed column, so each
// update can be a heap-only tuple (HOT: no index entry written) — if the
// row's page has room for the new version. Loaded full (fillfactor 100), a
// page's first updates found none, moved their versions to other pages and
// wrote an entry in the primary key for each: 22 % of the updates of
// `make txcost`'s legs (docs/PERFORMANCE.md, "The inventory's pages"). Only
// pages written after the step keep the room; a table loaded before it gets
// it from a rewrite (`VACUUM FULL room_inventory`). CockroachDB's
// storage has no pages to fill: the step does nothing there.
const roomInventoryFillfactor = `ALTER TABLE room_inventory SET (fillfactor = 80)`

// outboxPayloadJSON keeps an event's payload as the text the service sent
// (JSON: checked, stored as is) instead of parsing it into JSONB's binary
// form. The outbox only carries a payload: the relay publishes its bytes,
// and nothing queries inside it on the write path, so the parse bought
// nothing and cost every hold its share (docs/PERFORMANCE.md, "The event
// payload as JSON"). The operators `->` and `->>` work on both types. The
// change of type rewrites the outbox under an exclusive lock, so it runs as
// every step does, from the migration Job before the services start; the
// outbox holds only the events not yet pruned. On CockroachDB JSON is
// JSONB's alias: the step does nothing there.
const outboxPayloadJSON = `ALTER TABLE outbox ALTER COLUMN payload TYPE JSON`

// postgresOnly is a migration step that runs its statement only on
// PostgreSQL: the shared schema must stay portable (schema_test), and on
// CockroachDB the step is recorded as applied and does nothing. One DDL
// statement per step, as in schema/.
func postgresOnly(engine Engine, version int64, up, down string) *goose.Migration {
	run := func(stmt string) *goose.GoFunc {
		// In goose's transaction, on its connection, as the SQL steps run: a
		// step on the *sql.DB would wait for a second connection, which a
		// pool of one never has (the migration hung).
		return &goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
			if engine == EngineCockroach {
				return nil
			}
			_, err := tx.ExecContext(ctx, stmt)
			return err
		}}
	}
	return goose.NewGoMigration(version, run(up), run(down))
}

// applyOverlay runs every overlay file not yet recorded, in name order.
func applyOverlay(ctx context.Context, db *sql.DB, fsys fs.FS) ([]string, error) {
	var dbName string
	if err := db.QueryRowContext(ctx, "SELECT current_database()").Scan(&dbName); err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_overlay (
		name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	names, err := OverlayFiles(fsys)
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, name := range names {
		var done bool
		if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM schema_overlay WHERE name = $1)", name).Scan(&done); err != nil {
			return applied, fmt.Errorf("overlay %s: %w", name, err)
		}
		if done {
			continue
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return applied, err
		}
		stmt := strings.ReplaceAll(string(body), "{{database}}", quoteIdent(dbName))
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return applied, fmt.Errorf("overlay %s: %w", name, err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO schema_overlay (name) VALUES ($1)", name); err != nil {
			return applied, fmt.Errorf("overlay %s: %w", name, err)
		}
		applied = append(applied, name)
	}
	return applied, nil
}

// OverlayFiles lists the overlay's SQL files in the order they apply.
func OverlayFiles(fsys fs.FS) ([]string, error) {
	var names []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && path.Ext(p) == ".sql" {
			names = append(names, p)
		}
		return nil
	})
	slices.Sort(names)
	return names, err
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
