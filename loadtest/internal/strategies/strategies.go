// Package strategies measures the three classic ways to take inventory —
// pessimistic SELECT … FOR UPDATE, an optimistic version check, and the
// atomic conditional UPDATE Berth uses — under READ COMMITTED and
// SERIALIZABLE, on one hot row and on spread rows, in a scratch database
// that is dropped afterwards.
package strategies

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options shape the run.
type Options struct {
	Workers    int
	Duration   time.Duration
	SpreadRows int
	MaxRetries int
	Log        io.Writer
}

// Row is one combination's result.
type Row struct {
	Strategy, Isolation, Shape string
	Ops, Failed, Retries       int64
	Retried                    int64 // operations that needed at least one retry
	Seconds                    float64
	P50Ms, P99Ms               float64
	Reserved                   int64 // sum of reserved afterwards (must equal Ops)
}

// Throughput is successful takes per second.
func (r Row) Throughput() float64 { return float64(r.Ops) / r.Seconds }

var (
	strategiesList = []string{"pessimistic", "optimistic", "atomic"}
	isolations     = map[string]pgx.TxIsoLevel{"read committed": pgx.ReadCommitted, "serializable": pgx.Serializable}
	isoOrder       = []string{"read committed", "serializable"}
	shapes         = []string{"hot", "spread"}
)

var errConflict = errors.New("version conflict")

// take runs one attempt of a strategy on row id.
func take(ctx context.Context, tx pgx.Tx, strategy string, id int64) error {
	switch strategy {
	case "pessimistic":
		var reserved, limit int32
		if err := tx.QueryRow(ctx, `SELECT reserved, sell_limit FROM inv WHERE id = $1 FOR UPDATE`, id).Scan(&reserved, &limit); err != nil {
			return err
		}
		if reserved+1 > limit {
			return errors.New("sold out")
		}
		_, err := tx.Exec(ctx, `UPDATE inv SET reserved = reserved + 1 WHERE id = $1`, id)
		return err
	case "optimistic":
		var reserved, limit int32
		var version int64
		if err := tx.QueryRow(ctx, `SELECT reserved, sell_limit, version FROM inv WHERE id = $1`, id).Scan(&reserved, &limit, &version); err != nil {
			return err
		}
		if reserved+1 > limit {
			return errors.New("sold out")
		}
		tag, err := tx.Exec(ctx, `UPDATE inv SET reserved = reserved + 1, version = version + 1 WHERE id = $1 AND version = $2`, id, version)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errConflict
		}
		return nil
	default: // atomic
		tag, err := tx.Exec(ctx, `UPDATE inv SET reserved = reserved + 1 WHERE id = $1 AND reserved + 1 <= sell_limit`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errors.New("sold out")
		}
		return nil
	}
}

func retryable(err error) bool {
	if errors.Is(err, errConflict) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// Run measures every combination and returns the table.
func Run(ctx context.Context, adminURL string, o Options) ([]Row, error) {
	if adminURL == "" {
		return nil, errors.New("no database URL (--db or BERTH_TEST_DATABASE_URL)")
	}
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	name := "loadtest_strategies_" + hex.EncodeToString(b)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create scratch database: %w", err)
	}
	defer func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}()
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = int32(o.Workers + 1)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE inv (id INT8 PRIMARY KEY, reserved INT4 NOT NULL DEFAULT 0,
		sell_limit INT4 NOT NULL, version INT8 NOT NULL DEFAULT 1, CHECK (reserved >= 0 AND reserved <= sell_limit))`); err != nil {
		return nil, fmt.Errorf("create table: %w", err)
	}
	var rows []Row
	for _, shape := range shapes {
		for _, iso := range isoOrder {
			for _, st := range strategiesList {
				if ctx.Err() != nil {
					return rows, ctx.Err()
				}
				row, err := one(ctx, pool, o, st, iso, shape)
				if err != nil {
					return rows, fmt.Errorf("%s/%s/%s: %w", st, iso, shape, err)
				}
				if o.Log != nil {
					fmt.Fprintf(o.Log, "%-12s %-15s %-6s %8.0f ops/s  retries/op %.2f  p99 %.1f ms\n", st, iso, shape, row.Throughput(),
						float64(row.Retries)/float64(max(row.Ops, 1)), row.P99Ms)
				}
				rows = append(rows, row)
			}
		}
	}
	return rows, nil
}

func one(ctx context.Context, pool *pgxpool.Pool, o Options, strategy, iso, shape string) (Row, error) {
	n := int64(1)
	if shape == "spread" {
		n = int64(o.SpreadRows)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE inv`); err != nil {
		return Row{}, err
	}
	if _, err := pool.Exec(ctx, `INSERT INTO inv (id, sell_limit) SELECT g, 1000000000 FROM generate_series(1, $1::INT8) g`, n); err != nil {
		return Row{}, err
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE inv`); err != nil {
		return Row{}, err
	}
	row := Row{Strategy: strategy, Isolation: iso, Shape: shape}
	var retries, retried atomic.Int64
	c := engine.ClosedLoop(ctx, o.Workers, o.Duration, func(ctx context.Context, r *rand.Rand) error {
		id := 1 + r.Int64N(n)
		var err error
		attempts := 0
		for attempts = 0; attempts <= o.MaxRetries; attempts++ {
			err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: isolations[iso]}, func(tx pgx.Tx) error {
				return take(ctx, tx, strategy, id)
			})
			if err == nil || !retryable(err) {
				break
			}
			retries.Add(1)
			time.Sleep(time.Duration(r.IntN(1000*(1+min(attempts, 8)))) * time.Microsecond) // jittered backoff
		}
		if attempts > 0 {
			retried.Add(1)
		}
		return err
	})
	row.Seconds, row.Ops, row.Failed, row.P50Ms, row.P99Ms = c.Seconds, c.Ops, c.Failed, c.P50Ms, c.P99Ms
	row.Retries, row.Retried = retries.Load(), retried.Load()
	if err := pool.QueryRow(ctx, `SELECT COALESCE(sum(reserved), 0) FROM inv`).Scan(&row.Reserved); err != nil {
		return row, err
	}
	return row, nil
}

// Print writes the table.
func Print(w io.Writer, o Options, rows []Row) {
	fmt.Fprintf(w, "\n%d workers, %s per combination, spread = %d rows, hot = 1 row\n", o.Workers, o.Duration, o.SpreadRows)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tisolation\tshape\tops/s\tfailed\tretries/op\tops retried\tp50 ms\tp99 ms\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%d\t%.2f\t%.1f%%\t%.2f\t%.2f\t\n", r.Strategy, r.Isolation, r.Shape, r.Throughput(), r.Failed,
			float64(r.Retries)/float64(max(r.Ops, 1)), 100*float64(r.Retried)/float64(max(r.Ops+r.Failed, 1)), r.P50Ms, r.P99Ms)
	}
	tw.Flush()
}

// Verify checks every combination kept its count: the rows reserved equal
// the successful takes (no lost update, no phantom take).
func Verify(rows []Row) error {
	for _, r := range rows {
		if r.Reserved != r.Ops {
			return fmt.Errorf("INVARIANT VIOLATED: %s/%s/%s: %d takes succeeded but %d reserved", r.Strategy, r.Isolation, r.Shape, r.Ops, r.Reserved)
		}
	}
	return nil
}
