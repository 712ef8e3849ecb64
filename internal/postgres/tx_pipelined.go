package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A pipelined transaction sends its BEGIN in the same round trip as its
// first batch and, when the caller says the batch is its last
// (sendAndCommit), its COMMIT in the same round trip as that batch: a
// transaction of two batches is two round trips instead of four. On a
// loopback connection every round trip is two context switches and a
// wake-up of the backend, which cost about as much as a statement of the
// hold (docs/adr/0018-guest-count-and-pipelined-hold.md).
//
// Nothing is decided on trust. The server runs a pipeline's statements in
// order and skips everything after the first error up to the batch's end,
// so a COMMIT queued after a failing statement never runs: the transaction
// stays open and aborted, and is rolled back like any other. Which way a
// batch with a COMMIT ended is read from the server's transaction status
// after it: idle means the COMMIT ran (its error, if any, is the commit's);
// otherwise the transaction is still open. A connection lost while such a
// batch was out is berth.ErrUnknownOutcome, as a lost COMMIT is in InTx.

// beginSQL starts a transaction at the pool's isolation level, as
// pgx.BeginTx does.
func beginSQL(iso Isolation) string {
	if iso == Serializable {
		return "BEGIN ISOLATION LEVEL SERIALIZABLE"
	}
	return "BEGIN ISOLATION LEVEL READ COMMITTED"
}

const commitSQL = "COMMIT"

// InPipelinedTx is InTx for a transaction whose BEGIN travels with its
// first batch and whose last batch may carry its COMMIT (sendAndCommit). fn
// sees an ordinary pgx.Tx: a statement sent alone first sends BEGIN alone.
// On CockroachDB it is InTx (the savepoint protocol needs its own round
// trips), where sendAndCommit sends the batch and InTx commits after it.
func (db *DB) InPipelinedTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if db.Engine == EngineCockroach {
		return db.InTx(ctx, fn)
	}
	return db.retry(ctx, func() error { return db.attemptPipelined(ctx, fn) })
}

func (db *DB) attemptPipelined(ctx context.Context, fn func(pgx.Tx) error) error {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx := &pipeTx{conn: c.Conn(), begin: beginSQL(db.opts.Isolation)}
	// Unconditional, as in attempt: a panic in fn rolls back too. A
	// connection left inside a transaction (a failed rollback) is closed by
	// the rollback, and the pool discards it on release. A transaction that
	// ended already (its COMMIT went with its last batch) or never began has
	// nothing to roll back, nor a timeout to set up for it.
	defer func() {
		if tx.begun && !tx.ended {
			rollback(ctx, tx)
		}
		c.Release()
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return commitError(err)
	}
	return nil
}

// sendAndCommit sends b as the last round trip of tx. In a pipelined
// transaction b carries the COMMIT: the results' Close reports the commit's
// outcome (commitError's classes) and, when a statement of b failed
// instead, that statement's error with the transaction still open for the
// rollback. Elsewhere b is sent as is and the caller's InTx commits.
func sendAndCommit(ctx context.Context, tx pgx.Tx, b *pgx.Batch) pgx.BatchResults {
	if p, ok := tx.(*pipeTx); ok {
		return p.send(ctx, b, true)
	}
	return tx.SendBatch(ctx, b)
}

// pipeTx is a pgx.Tx on a pooled connection whose BEGIN has not been sent
// yet: it goes with the first batch.
type pipeTx struct {
	conn  *pgx.Conn
	begin string
	begun bool // BEGIN sent
	ended bool // COMMIT or ROLLBACK ran (or the connection is gone)
	// beginQ and commitQ are the BEGIN and the COMMIT as queued in a batch.
	beginQ, commitQ pgx.QueuedQuery
}

var errSavepoint = errors.New("a pipelined transaction has no savepoints")

func (t *pipeTx) beginAlone(ctx context.Context) error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	if t.begun {
		return nil
	}
	t.begun = true
	if _, err := t.conn.Exec(ctx, t.begin); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	return nil
}

// send sends b, with BEGIN in front when it is the first round trip and
// COMMIT behind when commit.
func (t *pipeTx) send(ctx context.Context, b *pgx.Batch, commit bool) pgx.BatchResults {
	if t.ended {
		return &pipeResults{err: pgx.ErrTxClosed}
	}
	if t.begun && !commit {
		return t.conn.SendBatch(ctx, b)
	}
	// The BEGIN and the COMMIT are queued from the transaction's own
	// statements (each is sent at most once), into a batch sized for them.
	nb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+2)}
	head := !t.begun
	if head {
		t.beginQ.SQL = t.begin
		nb.QueuedQueries = append(nb.QueuedQueries, &t.beginQ)
		t.begun = true
	}
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	if commit {
		t.commitQ.SQL = commitSQL
		nb.QueuedQueries = append(nb.QueuedQueries, &t.commitQ)
	}
	r := &pipeResults{inner: t.conn.SendBatch(ctx, nb), head: head}
	if commit {
		r.onClose = t.committed
	}
	return r
}

// committed classifies how a batch carrying the COMMIT ended, from the
// error its results' Close returned.
func (t *pipeTx) committed(err error) error {
	if t.conn.IsClosed() {
		t.ended = true
		if err == nil {
			err = errors.New("connection closed")
		}
		return fmt.Errorf("commit: %w: %w", berth.ErrUnknownOutcome, err)
	}
	if t.conn.PgConn().TxStatus() != 'I' {
		// A statement before the COMMIT failed, so the COMMIT was skipped:
		// the transaction is open (aborted) and is rolled back.
		if err == nil {
			err = errors.New("commit: the transaction is still open")
		}
		return err
	}
	t.ended = true
	if err != nil {
		return commitError(err) // the COMMIT failed and rolled back
	}
	return nil
}

func (t *pipeTx) Begin(context.Context) (pgx.Tx, error) { return nil, errSavepoint }

// Commit commits what is not committed yet: nothing when a batch carried
// the COMMIT already or nothing was ever sent.
func (t *pipeTx) Commit(ctx context.Context) error {
	if t.ended || !t.begun {
		t.ended = true
		return nil
	}
	t.ended = true
	tag, err := t.conn.Exec(ctx, commitSQL)
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback ends an open transaction. A connection that cannot roll back is
// closed, which ends the transaction on the server, as pgx does.
func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.ended || !t.begun {
		t.ended = true
		return nil
	}
	t.ended = true
	if _, err := t.conn.Exec(ctx, "ROLLBACK"); err != nil {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = t.conn.Close(closeCtx)
		return err
	}
	return nil
}

func (t *pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.beginAlone(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.send(ctx, b, false)
}

// LargeObjects are not used by the store.
func (t *pipeTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *pipeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.beginAlone(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.beginAlone(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.beginAlone(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pipeTx) Conn() *pgx.Conn { return t.conn }

// pipeResults are a pipelined batch's results without the BEGIN in front
// (head) and with the COMMIT behind read by Close (onClose).
type pipeResults struct {
	inner    pgx.BatchResults
	head     bool
	err      error
	onClose  func(error) error
	closed   bool // Close ran: later calls return its outcome
	closeErr error
}

func (r *pipeResults) skipHead() error {
	if r.head {
		r.head = false
		if _, err := r.inner.Exec(); err != nil {
			r.err = fmt.Errorf("begin: %w", err)
		}
	}
	return r.err
}

func (r *pipeResults) Exec() (pgconn.CommandTag, error) {
	if err := r.skipHead(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.inner.Exec()
}

func (r *pipeResults) Query() (pgx.Rows, error) {
	if err := r.skipHead(); err != nil {
		return nil, err
	}
	return r.inner.Query()
}

func (r *pipeResults) QueryRow() pgx.Row {
	if err := r.skipHead(); err != nil {
		return errRow{err}
	}
	return r.inner.QueryRow()
}

func (r *pipeResults) Close() error {
	if r.inner == nil {
		return r.err
	}
	if r.closed {
		return r.closeErr
	}
	headErr := r.skipHead()
	err := r.inner.Close()
	if err == nil {
		err = headErr
	}
	if r.onClose != nil {
		err = r.onClose(err)
	}
	r.closed, r.closeErr = true, err
	return err
}

// Tx is nil: the batch did not begin a transaction of pgx's (pgx's
// Batch.BeginTx saves the BEGIN's round trip, not the COMMIT's).
func (r *pipeResults) Tx() pgx.Tx { return nil }

// errRow is a row that failed before it was asked for.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
