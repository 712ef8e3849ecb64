package postgres_test

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// The PostgreSQL-only step (the outbox's BRIN index, 00960) runs on the
// connection of goose's own transaction: a pool of one connection migrates
// (a step on the *sql.DB waited for a second one until its deadline), and
// the index is there afterwards.
func TestMigratePostgresOnlyStepOnAPoolOfOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{MaxConns: 1})
	var method string
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam
		WHERE c.relname = 'outbox_created_brin' AND c.relkind = 'i'`).Scan(&method); err != nil {
		t.Fatalf("the outbox's BRIN index after migrating: %v", err)
	}
	if method != "brin" {
		t.Fatalf("outbox_created_brin is a %s index, want brin", method)
	}
}
