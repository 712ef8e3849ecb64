package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A pipelined transaction (BEGIN in its first batch, COMMIT in its last)
// commits everything or nothing, and tells which: a statement that fails
// before the COMMIT skips it, a COMMIT that fails (a deferred constraint)
// is reported as the commit's error, and the one pooled connection is
// usable after each. Replayed through RunScript, which runs a pipelined
// Script with the store's own machinery.
func TestPipelinedTxCommitsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{MaxConns: 1})
	for _, stmt := range []string{
		`CREATE TABLE a (id INT8 PRIMARY KEY)`,
		`CREATE TABLE b (id INT8 NOT NULL, CONSTRAINT b_once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := dbtest.SQL(db).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	script := func() postgres.Script {
		return postgres.Script{Name: "pipe", Pipelined: true, Trips: []postgres.Trip{
			{Steps: []postgres.Step{{SQL: `INSERT INTO a VALUES ($1)`, Args: []string{"a"}}}},
			{Steps: []postgres.Step{{SQL: `INSERT INTO b VALUES ($1)`, Args: []string{"b1"}}, {SQL: `INSERT INTO b VALUES ($1)`, Args: []string{"b2"}}}},
		}}
	}
	rowsOf := func() (a, b int) {
		t.Helper()
		if err := dbtest.SQL(db).QueryRow(ctx, `SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b)`).Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	run := func(aID int, b1 any, b2 int) error {
		return db.RunScript(ctx, script(), postgres.Vars{"a": aID, "b1": b1, "b2": b2})
	}
	if err := run(1, 1, 2); err != nil {
		t.Fatalf("first transaction: %v", err)
	}
	if a, b := rowsOf(); a != 1 || b != 2 {
		t.Fatalf("after a commit: %d rows in a, %d in b; want 1, 2", a, b)
	}
	// A statement of the first batch fails (a's key 1 again): the
	// transaction ends there.
	if err := run(1, 3, 4); sqlState(err) != "23505" {
		t.Fatalf("duplicate key in the first trip: %v, want 23505", err)
	}
	// A statement of the last batch fails before its COMMIT (b's id NULL):
	// the COMMIT queued behind it is skipped and the first trip's row of a
	// rolls back.
	if err := run(2, nil, 4); sqlState(err) != "23502" {
		t.Fatalf("null in the last trip: %v, want 23502", err)
	}
	// The COMMIT itself fails: the deferred unique constraint is checked
	// there, after every statement of the last batch succeeded.
	if err := run(2, 5, 5); sqlState(err) != "23505" {
		t.Fatalf("deferred violation at COMMIT: %v, want 23505", err)
	}
	if a, b := rowsOf(); a != 1 || b != 2 {
		t.Fatalf("after three failed transactions: %d rows in a, %d in b; want 1, 2 (nothing of theirs committed)", a, b)
	}
	// The pool's one connection is idle and usable again.
	if err := run(3, 6, 7); err != nil {
		t.Fatalf("after the failures: %v", err)
	}
	if a, b := rowsOf(); a != 2 || b != 4 {
		t.Fatalf("at the end: %d rows in a, %d in b; want 2, 4", a, b)
	}
	var idle int
	if err := db.InTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&idle)
	}); err != nil || idle != 0 {
		t.Fatalf("sessions idle in a transaction: %d (%v), want 0", idle, err)
	}
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
