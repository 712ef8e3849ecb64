// Package postgres is Berth's store on PostgreSQL and CockroachDB: the
// connection pool, the one transaction helper every write goes through, the
// migrations, and one file per resource (hotels, reservations, inventory,
// idempotency keys, the outbox, placements). Rows become domain values through
// named functions; pgx types never leave this package.
package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Engine is the database server the pool talks to, detected once at start.
type Engine int

// The engines Berth runs on.
const (
	EnginePostgres Engine = iota
	EngineCockroach
)

func (e Engine) String() string {
	if e == EngineCockroach {
		return "cockroachdb"
	}
	return "postgresql"
}

// Isolation is the isolation level of write transactions.
type Isolation string

// The supported isolation levels. READ COMMITTED is the measured default
// (docs/adr/0002-isolation.md): the conditional UPDATE re-evaluates after a
// lock wait, so the last room costs no retry storm.
const (
	ReadCommitted Isolation = "read_committed"
	Serializable  Isolation = "serializable"
)

// ParseIsolation parses an isolation setting.
func ParseIsolation(s string) (Isolation, error) {
	switch Isolation(strings.ToLower(strings.TrimSpace(s))) {
	case "", ReadCommitted:
		return ReadCommitted, nil
	case Serializable:
		return Serializable, nil
	}
	return "", fmt.Errorf("isolation %q: want read_committed or serializable", s)
}

func (i Isolation) pgx() pgx.TxIsoLevel {
	if i == Serializable {
		return pgx.Serializable
	}
	return pgx.ReadCommitted
}

// DefaultIdleInTxTimeout is the idle_in_transaction_session_timeout of a
// pool whose Options leave it zero.
const DefaultIdleInTxTimeout = 60 * time.Second

// Options configure a DB.
type Options struct {
	Isolation Isolation
	// LockTimeout and StatementTimeout bound every statement so a hot
	// partition fails fast instead of exhausting the pool. Zero leaves the
	// server default.
	LockTimeout      time.Duration
	StatementTimeout time.Duration
	// IdleInTxTimeout is idle_in_transaction_session_timeout: the server
	// ends a session left idle inside a transaction for longer, and with it
	// the transaction's locks — the last fence behind the transaction
	// helpers, should a transaction ever leak. Zero means
	// DefaultIdleInTxTimeout, longer than any transaction of ours stays
	// idle (the outbox relay's claim waits for PubAcks up to 35 s).
	IdleInTxTimeout time.Duration
	// MaxConns sizes the pool; zero keeps pgxpool's default.
	MaxConns int32
	// MinConns is how many connections the pool keeps open however idle
	// it is (pgxpool's MinConns); zero lets it close every idle one.
	MinConns int32
	// Warm are statements every connection the pool opens has the server
	// plan before it is used (warm.go): the hot path's, so that its first
	// requests find the server's caches warm. A failure leaves the
	// connection cold, never unusable (DB.WarmFailures counts them).
	Warm []string
	// MaxRetries bounds whole-transaction retries of 40001/40P01.
	MaxRetries int
	// Telemetry, when set, traces every query (OpenTelemetry).
	Telemetry Telemetry
	// Tracer, when set, sees every query instead: a test recording the
	// statements a store method sends. Services set Telemetry.
	Tracer pgx.QueryTracer
}

// DB is a pool plus what Berth knows about the server behind it.
type DB struct {
	pool   *pgxpool.Pool
	Engine Engine
	opts   Options
	// onRetry, when set, is called for each retried transaction attempt.
	onRetry func(err error)
	// warm plans Options.Warm on every new connection (nil without).
	warm *warmer
}

// Open connects, detects the engine and returns a ready DB.
func Open(ctx context.Context, url string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 10
	}
	if opts.Isolation == "" {
		opts.Isolation = ReadCommitted
	}
	// Timeouts are session settings of every pooled connection, so they cost
	// no extra round trip per transaction.
	if opts.LockTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprint(opts.LockTimeout.Milliseconds())
	}
	if opts.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(opts.StatementTimeout.Milliseconds())
	}
	// A session variable on both engines (CockroachDB has it too), set per
	// connection like the timeouts above.
	if opts.IdleInTxTimeout <= 0 {
		opts.IdleInTxTimeout = DefaultIdleInTxTimeout
	}
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(opts.IdleInTxTimeout.Milliseconds())
	switch {
	case opts.Tracer != nil:
		cfg.ConnConfig.Tracer = opts.Tracer
	case opts.Telemetry != nil:
		cfg.ConnConfig.Tracer = queryTracer(opts.Telemetry)
	}
	cfg.MinConns = max(opts.MinConns, 0)
	var w *warmer
	if len(opts.Warm) > 0 {
		w = &warmer{stmts: opts.Warm}
		cfg.AfterConnect = w.afterConnect
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	db := &DB{pool: pool, opts: opts, warm: w}
	if db.Engine, err = DetectEngine(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// DetectEngine asks the server what it is.
func DetectEngine(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (Engine, error) {
	var v string
	if err := q.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return 0, fmt.Errorf("detect engine: %w", err)
	}
	if strings.Contains(v, "CockroachDB") {
		return EngineCockroach, nil
	}
	return EnginePostgres, nil
}

// Close closes the pool.
func (db *DB) Close() { db.pool.Close() }

// Ping checks the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.pool.Ping(ctx) }

// Isolation returns the isolation level of write transactions.
func (db *DB) Isolation() Isolation { return db.opts.Isolation }

// OnRetry registers a hook called once per retried attempt (for metrics).
func (db *DB) OnRetry(f func(err error)) { db.onRetry = f }

// PoolStats is a snapshot of the connection pool.
type PoolStats struct {
	Acquired, Idle, Total, Max int32
	// EmptyAcquire counts acquires that had to wait for a connection: the
	// pool was saturated.
	EmptyAcquire int64
	// Acquires counts the acquires; AcquireWait is their summed wait.
	Acquires    int64
	AcquireWait time.Duration
}

// PoolStats reports the pool's saturation (for metrics).
func (db *DB) PoolStats() PoolStats {
	s := db.pool.Stat()
	return PoolStats{
		Acquired: s.AcquiredConns(), Idle: s.IdleConns(), Total: s.TotalConns(), Max: s.MaxConns(),
		EmptyAcquire: s.EmptyAcquireCount(), Acquires: s.AcquireCount(), AcquireWait: s.AcquireDuration(),
	}
}
