package postgres_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A failure at COMMIT must reach the caller: the deferred foreign key below
// is checked only when the transaction commits, after fn returned nil.
func TestInTxCommitFailureReachesCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	for _, stmt := range []string{
		`CREATE TABLE parent (id INT8 PRIMARY KEY)`,
		`CREATE TABLE child (id INT8 PRIMARY KEY, parent_id INT8 REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := dbtest.SQL(db).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	var ran atomic.Int32
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		ran.Add(1)
		_, err := tx.Exec(ctx, `INSERT INTO child (id, parent_id) VALUES (1, 42)`)
		return err // nil: the violation is only found at COMMIT
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		t.Fatalf("InTx error = %v, want the foreign key violation (23503) raised at COMMIT", err)
	}
	if ran.Load() != 1 {
		t.Errorf("fn ran %d times; a non-retryable commit failure must not be retried", ran.Load())
	}
	var n int
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT count(*) FROM child`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("child has %d rows after a failed commit", n)
	}
}

// Serialization failures retry the whole transaction with a fresh snapshot
// until it commits. Every worker's first attempt reads the counter, then
// waits until all of them have read it: all but one must then fail with
// 40001 and run again, so the test fails if InTx ever stops retrying (or
// retries on a stale snapshot, which would lose an increment).
func TestInTxRetriesSerializationFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const workers = 8
	db, _ := dbtest.New(t, postgres.Options{Isolation: postgres.Serializable, MaxRetries: 50, MaxConns: workers + 2})
	if _, err := dbtest.SQL(db).Exec(ctx, `CREATE TABLE counter (id INT8 PRIMARY KEY, n INT8 NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := dbtest.SQL(db).Exec(ctx, `INSERT INTO counter VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	var retries, attempts atomic.Int32
	db.OnRetry(func(err error) {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "40001" {
			t.Errorf("retried after %v, want a serialization failure (40001)", err)
		}
		retries.Add(1)
	})
	var read sync.WaitGroup // every first attempt has read the counter
	read.Add(workers)
	errs := make(chan error, workers)
	for range workers {
		go func() {
			first := true
			errs <- db.InTx(ctx, func(tx pgx.Tx) error {
				attempts.Add(1)
				var n int64
				if err := tx.QueryRow(ctx, `SELECT n FROM counter WHERE id = 1`).Scan(&n); err != nil {
					return err
				}
				if first {
					first = false
					read.Done()
					read.Wait()
				}
				_, err := tx.Exec(ctx, `UPDATE counter SET n = $1 WHERE id = 1`, n+1)
				return err
			})
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatalf("InTx: %v", err)
		}
	}
	var n int64
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT n FROM counter WHERE id = 1`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != workers {
		t.Fatalf("counter = %d, want %d: a lost update means a retry reused a stale snapshot", n, workers)
	}
	if r := retries.Load(); r < workers-1 {
		t.Fatalf("%d retries, want at least %d: the %d workers that lost the first round must each run again", r, workers-1, workers-1)
	}
	if a, r := attempts.Load(), retries.Load(); a != workers+r {
		t.Fatalf("fn ran %d times for %d transactions and %d retries", a, workers, r)
	}
}

// A non-retryable error from fn rolls back and is returned as is.
func TestInTxFnErrorRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	if _, err := dbtest.SQL(db).Exec(ctx, `CREATE TABLE t (id INT8 PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want boom", err)
	}
	var n int
	_ = dbtest.SQL(db).QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n)
	if n != 0 {
		t.Fatalf("t has %d rows after fn failed", n)
	}
}
