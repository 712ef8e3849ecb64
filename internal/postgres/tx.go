package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/cockroachdb/cockroach-go/v2/crdb"
	crdbpgx "github.com/cockroachdb/cockroach-go/v2/crdb/crdbpgxv5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// InTx runs fn in a write transaction and retries it when the server asks.
//
// fn may run more than once: generate ids and timestamps before calling
// InTx, do nothing but SQL inside fn, and append outbox rows inside it.
//
// On CockroachDB it is crdbpgx.ExecuteTx (the savepoint protocol, retrying
// 40001 inside one transaction, where RELEASE SAVEPOINT is the commit).
//
// On PostgreSQL that helper is unsafe: it ignores the error of the final
// COMMIT, and a retry inside one REPEATABLE READ/SERIALIZABLE transaction
// keeps the old snapshot and fails forever. So here the whole transaction is
// retried — BEGIN … COMMIT — with jittered backoff and a cap, and the COMMIT's
// error is always checked: 40001/40P01 are retried (nothing was committed),
// a lost connection or 40003 at COMMIT is berth.ErrUnknownOutcome, anything
// else is returned as is. Success is reported only after COMMIT succeeded.
//
// A panic in fn rolls the transaction back and then goes on to the caller
// (the HTTP server answers it with a 500 problem): no lock outlives it.
func (db *DB) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	opts := pgx.TxOptions{IsoLevel: db.opts.Isolation.pgx()}
	if db.Engine == EngineCockroach {
		ctx = crdb.WithMaxRetries(ctx, db.opts.MaxRetries)
		// crdbpgx runs fn once per attempt and only retries 40001, so every
		// run after the first is a retry of that kind (counted for metrics).
		attempts := 0
		// crdbpgx rolls back on an error but not on a panic: the deferred
		// rollback below ends the transaction fn panicked in (a no-op once
		// crdbpgx committed or rolled back itself).
		var current pgx.Tx
		defer func() {
			if current != nil {
				rollback(ctx, current)
			}
		}()
		return crdbpgx.ExecuteTx(ctx, db.pool, opts, func(tx pgx.Tx) error {
			current = tx
			if attempts > 0 && db.onRetry != nil {
				db.onRetry(errRetry)
			}
			attempts++
			return fn(tx)
		})
	}
	return db.retry(ctx, func() error { return db.attempt(ctx, opts, fn) })
}

// retry runs one attempt of a PostgreSQL transaction until it succeeds, fails
// for good, or MaxRetries retries of a serialization failure or deadlock
// were spent (jittered backoff in between).
func (db *DB) retry(ctx context.Context, attempt func() error) error {
	backoff := 2 * time.Millisecond
	for n := 0; ; n++ {
		err := attempt()
		if err == nil || !retryable(err) || n >= db.opts.MaxRetries {
			return err
		}
		if db.onRetry != nil {
			db.onRetry(err)
		}
		// Full jitter: sleep a random time up to the current cap.
		sleep := time.Duration(rand.Int64N(int64(backoff))) + time.Millisecond
		select {
		case <-ctx.Done():
			return fmt.Errorf("retry transaction: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(sleep):
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

func (db *DB) attempt(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := db.pool.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// Unconditional, so that it runs on a panic in fn too: deciding by the
	// returned error (as this once did) skipped the rollback when fn
	// panicked, and the pooled connection stayed checked out holding the
	// transaction's row locks. After COMMIT it is a no-op.
	defer rollback(ctx, tx)
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return commitError(err)
	}
	return nil
}

// rollback ends tx unless it already ended (pgx then answers ErrTxClosed
// without a round trip). It is meant for a defer, so it also runs while a
// panic unwinds: the panic goes on, with its own stack, once the
// transaction's locks are released and its connection is back in the pool.
// The caller's context may be cancelled by then; the rollback gets a few
// seconds of its own, and a connection that cannot roll back in that time
// is closed, which ends the transaction on the server as well.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(ctx) // the transaction is over either way; the error adds nothing
}

// commitError classifies an error from COMMIT. It never returns nil.
func commitError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == "40003" { // statement_completion_unknown
			return fmt.Errorf("commit: %w: %w", berth.ErrUnknownOutcome, err)
		}
		// A serialization failure at COMMIT rolled back: safe to retry.
		return fmt.Errorf("commit: %w", err)
	}
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return fmt.Errorf("commit rolled back: %w", err)
	}
	// No answer from the server: the COMMIT may have landed or not.
	return fmt.Errorf("commit: %w: %w", berth.ErrUnknownOutcome, err)
}

// retryable reports whether the whole transaction may run again: a
// serialization failure or a deadlock, never an unknown outcome.
func retryable(err error) bool {
	if errors.Is(err, berth.ErrUnknownOutcome) {
		return false
	}
	code := sqlState(err)
	return code == "40001" || code == "40P01"
}

// sqlState returns the SQLSTATE of err, or "".
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// constraintName returns the violated constraint of err, or "".
func constraintName(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.ConstraintName
	}
	return ""
}

// classify turns server errors that mean "too busy" or "down" into
// berth.CodeUnavailable with a Retry-After, leaving others as they are.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var be *berth.Error
	if errors.As(err, &be) {
		return err
	}
	switch sqlState(err) {
	case "55P03": // lock_not_available: lock_timeout fired on a hot partition
		return &berth.Error{Code: berth.CodeUnavailable, Detail: "the partition is busy; retry shortly", RetryAfter: 1, Err: err}
	case "57014": // query_canceled: statement_timeout
		return &berth.Error{Code: berth.CodeUnavailable, Detail: "the request took too long; retry shortly", RetryAfter: 1, Err: err}
	case "40001", "40P01":
		return &berth.Error{Code: berth.CodeUnavailable, Detail: "too much contention; retry shortly", RetryAfter: 1, Err: err}
	case "57P01", "57P02", "57P03", "08000", "08003", "08006":
		return &berth.Error{Code: berth.CodeUnavailable, Detail: "the database is unavailable", RetryAfter: 2, Err: err}
	}
	if errors.Is(err, berth.ErrUnknownOutcome) {
		return &berth.Error{Code: berth.CodeUnavailable, Detail: "the outcome is unknown; retry with the same Idempotency-Key", RetryAfter: 1, Err: err}
	}
	if IsTransient(err) {
		// The connection broke, the server restarts, a deadline passed: the
		// request did not fail, the database did. The client retries (with
		// the same Idempotency-Key, so a write that did commit replays).
		return &berth.Error{Code: berth.CodeUnavailable, Detail: "the database is unavailable; retry shortly", RetryAfter: 2, Err: err}
	}
	return err
}

// errRetry marks an error after which the whole transaction may run again.
var errRetry = &pgconn.PgError{Code: "40001", Message: "retry transaction"}

// IsTransient reports whether err says the database could not be reached
// or could not finish in time — a failure that goes away by itself (a
// restart, a network blip, contention), as opposed to one caused by the
// request. Event consumers retry transient failures for as long as they
// last instead of dead-lettering the event.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, berth.ErrUnknownOutcome) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var (
		connErr *pgconn.ConnectError
		netErr  net.Error
	)
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	code := sqlState(err)
	switch {
	case code == "":
		return false
	case strings.HasPrefix(code, "08"), // connection exceptions
		strings.HasPrefix(code, "53"),  // insufficient resources
		strings.HasPrefix(code, "57P"), // admin shutdown, crash shutdown, cannot connect now
		code == "40001", code == "40P01", code == "55P03", code == "57014":
		return true
	}
	return false
}
