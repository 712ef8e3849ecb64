package postgres_test

import (
	"context"
	"slices"
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

// The inventory's pages keep room for the new versions of its rows
// (PostgreSQL step 00961): the table's storage parameter is set.
func TestMigrateLeavesRoomOnTheInventorysPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	var opts []string
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class
		WHERE relname = 'room_inventory' AND relkind = 'r'`).Scan(&opts); err != nil {
		t.Fatalf("room_inventory's storage parameters: %v", err)
	}
	if !slices.Contains(opts, "fillfactor=80") {
		t.Fatalf("room_inventory's storage parameters are %q, want fillfactor=80 among them", opts)
	}
}

// The outbox keeps each event's payload as the text the service sent
// (PostgreSQL step 00962): the column is JSON, not JSONB.
func TestMigrateStoresTheOutboxPayloadAsJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	var typ string
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
		WHERE a.attrelid = 'outbox'::regclass AND a.attname = 'payload'`).Scan(&typ); err != nil {
		t.Fatalf("the outbox payload's type: %v", err)
	}
	if typ != "json" {
		t.Fatalf("the outbox payload is %s, want json", typ)
	}
}
