// Package dbtest gives each test its own PostgreSQL database, created with a
// random name, migrated by the real migrations and dropped when the test
// ends. It needs BERTH_TEST_DATABASE_URL (an admin URL, as written to
// .local/env by `make deps` or `make up`). Without it a test fails, loudly:
// a suite that passes because its database tests skipped proves nothing.
// Only `go test -short` (the quick tests) skips them, and not even that when
// BERTH_REQUIRE_DB is set (as `make test-short` does).
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AdminURL returns the admin database URL. Without one the test fails
// (skips under -short, unless BERTH_REQUIRE_DB is set).
func AdminURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("BERTH_TEST_DATABASE_URL")
	if url == "" {
		const why = "BERTH_TEST_DATABASE_URL is not set: run `make deps`, then `set -a; source .local/env; set +a` (or run `make test`)"
		if testing.Short() && os.Getenv("BERTH_REQUIRE_DB") == "" {
			t.Skip(why + "; skipped under -short")
		}
		t.Fatal(why)
	}
	return url
}

// NewURL creates an empty database and returns its URL; it is dropped when
// the test ends.
func NewURL(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "berth_test_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatalf("parse test url: %v", err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// New creates a migrated database and opens it with opts.
func New(t testing.TB, opts postgres.Options) (*postgres.DB, string) {
	t.Helper()
	url := NewURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := postgres.Open(ctx, url, opts)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(db.Close)
	if _, err := postgres.Migrate(ctx, db); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	Register(t, db, url)
	return db, url
}

// A test checks what a store wrote by reading the database itself, with SQL
// of its own rather than through the store under test. The store keeps its
// pool to itself, so the test gets a second pool on the same database.
var (
	mu      sync.Mutex
	sqlURLs = map[*postgres.DB]*rawPool{}
)

type rawPool struct {
	url  string
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

// Register makes db's database reachable through SQL until the test ends;
// New registers the databases it makes.
func Register(t testing.TB, db *postgres.DB, url string) {
	t.Helper()
	rp := &rawPool{url: url}
	mu.Lock()
	sqlURLs[db] = rp
	mu.Unlock()
	t.Cleanup(func() {
		mu.Lock()
		delete(sqlURLs, db)
		mu.Unlock()
		if rp.pool != nil {
			rp.pool.Close()
		}
	})
}

// SQL returns a pool on db's database for a test's own queries (opened on
// first use, closed when the test ends). It panics for a database that New
// did not make nor Register name: that is a mistake in the test.
func SQL(db *postgres.DB) *pgxpool.Pool {
	mu.Lock()
	rp := sqlURLs[db]
	mu.Unlock()
	if rp == nil {
		panic("dbtest.SQL: database not made by dbtest.New nor registered")
	}
	rp.once.Do(func() {
		rp.pool, rp.err = pgxpool.New(context.Background(), rp.url)
	})
	if rp.err != nil {
		panic(fmt.Sprintf("dbtest.SQL: %v", rp.err))
	}
	return rp.pool
}

// LockWaiters counts the sessions of the pool's database that wait for a
// row or table lock: how a race test knows that a request it started has
// reached the lock it is meant to wait for.
func LockWaiters(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
	return n, err
}
