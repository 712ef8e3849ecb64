package postgres

import (
	"context"
	"fmt"
	"net/url"
)

// OpenFollowerReads opens the pool that serves cache misses when follower
// reads are configured: on CockroachDB every transaction of it is read-only
// and runs AS OF SYSTEM TIME follower_read_timestamp() (the session settings
// default_transaction_read_only and default_transaction_use_follower_reads,
// CockroachDB's documented equivalent of that clause), so a miss is served
// by the nearest replica instead of the leaseholder in the home region —
// about 5 s stale. The statement never reaches the shared schema or
// PostgreSQL: on PostgreSQL (primary.Engine) it returns nil, nil and reads
// stay on the primary pool.
func OpenFollowerReads(ctx context.Context, primary *DB, dsn string, opts Options) (*DB, error) {
	if primary.Engine != EngineCockroach {
		return nil, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("follower reads: parse database url: %w", err)
	}
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	q.Set("default_transaction_use_follower_reads", "on")
	u.RawQuery = q.Encode()
	db, err := Open(ctx, u.String(), opts)
	if err != nil {
		return nil, fmt.Errorf("follower reads: %w", err)
	}
	return db, nil
}
