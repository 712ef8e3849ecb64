package natsbus_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
)

// outboxRow inserts an outbox row of region created age ago; sentAge < 0
// leaves it unsent.
func outboxRow(t *testing.T, ctx context.Context, pool *pgxpool.Pool, region string, age, sentAge time.Duration) string {
	t.Helper()
	id := uuid.NewString()
	var sent *time.Time
	if sentAge >= 0 {
		s := time.Now().Add(-sentAge)
		sent = &s
	}
	if _, err := pool.Exec(ctx, `INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type,
		aggregate_id, aggregate_version, payload, created_at, sent_at)
		VALUES ($1, $2, $3, 'hotel', 'test.event', $1, 1, '{}', $4, $5)`,
		uuid.NewString(), id, region, time.Now().Add(-age), sent); err != nil {
		t.Fatal(err)
	}
	return id
}

// outboxLeft reports which of ids are still in the outbox.
func outboxLeft(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ids []string) []string {
	t.Helper()
	var left []string
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(event_id::TEXT), '{}') FROM outbox WHERE event_id = ANY($1::UUID[])`,
		ids).Scan(&left); err != nil {
		t.Fatal(err)
	}
	return left
}

type pruneFixture struct {
	expired []string // sent before the retention, of the relay's region
	kept    []string // everything prune must leave
}

// seedPrune writes n expired sent rows of us-east and, beside them, the rows
// prune must never delete: unsent old ones, sent ones younger than the
// retention (one created before it), and another region's expired ones.
func seedPrune(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int) pruneFixture {
	const keep = 72 * time.Hour
	var f pruneFixture
	for range n {
		f.expired = append(f.expired, outboxRow(t, ctx, pool, "us-east", keep+2*time.Hour, keep+time.Hour))
	}
	for range 3 {
		f.kept = append(f.kept,
			outboxRow(t, ctx, pool, "us-east", keep+2*time.Hour, -1),             // never sent
			outboxRow(t, ctx, pool, "us-east", keep+2*time.Hour, keep-time.Hour), // sent late: young
			outboxRow(t, ctx, pool, "us-east", time.Minute, time.Second),         // young
			outboxRow(t, ctx, pool, "eu-west", keep+2*time.Hour, keep+time.Hour), // another region's
		)
	}
	return f
}

// One prune run deletes every expired sent row of its region, in several
// bounded statements, and nothing else.
func TestPruneCatchesUpInBoundedBatches(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, _ := dbtest.New(t, postgres.Options{})
	pool := dbtest.SQL(db)
	f := seedPrune(t, ctx, pool, 35)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &countingOutbox{Outbox: postgres.NewStore(db, "us-east", time.Minute)}
	// A run whose budget is spent after its first statement stops there
	// and says it has not caught up.
	short := natsbus.NewRelay(nil, out, natsbus.RelayConfig{Region: "us-east", PruneBatch: 10, PruneBudget: time.Nanosecond, Log: quiet})
	if caughtUp, err := short.Prune(ctx); err != nil || caughtUp {
		t.Fatalf("prune over budget: caught up %v, err %v", caughtUp, err)
	}
	if left := outboxLeft(t, ctx, pool, f.expired); len(left) != len(f.expired)-10 {
		t.Fatalf("prune over budget left %d of %d expired rows, want %d", len(left), len(f.expired), len(f.expired)-10)
	}
	relay := natsbus.NewRelay(nil, out, natsbus.RelayConfig{Region: "us-east", PruneBatch: 10, PruneBudget: time.Minute, Log: quiet})
	caughtUp, err := relay.Prune(ctx)
	if err != nil || !caughtUp {
		t.Fatalf("prune: caught up %v, err %v", caughtUp, err)
	}
	if left := outboxLeft(t, ctx, pool, f.expired); len(left) != 0 {
		t.Fatalf("%d of %d expired rows left after one prune run", len(left), len(f.expired))
	}
	if left := outboxLeft(t, ctx, pool, f.kept); len(left) != len(f.kept) {
		t.Fatalf("prune deleted %d rows it must keep", len(f.kept)-len(left))
	}
	// 35 rows at 10 a statement: one over budget, then three, the last one
	// short.
	if got := out.prunes.Load(); got != 4 {
		t.Fatalf("prune ran %d statements, want 4", got)
	}
}

// countingOutbox is the real store, counting the relay's calls: prune
// statements, and relay rounds that were not full.
type countingOutbox struct {
	natsbus.Outbox
	batch   int
	prunes  atomic.Int64
	partial atomic.Int64
}

func (o *countingOutbox) RelayOutbox(ctx context.Context, limit int,
	publish func(ctx context.Context, recs []events.Record) ([]string, error)) (int, error) {
	n, err := o.Outbox.RelayOutbox(ctx, limit, publish)
	if err == nil && n < o.batch {
		o.partial.Add(1)
	}
	return n, err
}

func (o *countingOutbox) PruneOutbox(ctx context.Context, keep time.Duration, limit int) (int, error) {
	o.prunes.Add(1)
	return o.Outbox.PruneOutbox(ctx, keep, limit)
}

// Prune runs while the relay is kept busy with full rounds: it used to run
// only after a round that was not full.
// insertUnsent writes n unsent events of us-east for a relay to publish.
func insertUnsent(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int) {
	t.Helper()
	if _, err := pool.Exec(ctx, `INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type,
		aggregate_id, aggregate_version, payload)
		SELECT gen_random_uuid(), gen_random_uuid(), 'us-east', 'hotel', 'test.event', gen_random_uuid(), 1, '{}'
		FROM generate_series(1, $1::INT)`, n); err != nil {
		t.Fatal(err)
	}
}

// relayJetStream is JetStream on a fresh in-process nats-server, for a
// relay to publish to.
func relayJetStream(t *testing.T, name string, log *slog.Logger) jetstream.JetStream {
	t.Helper()
	srv := natstest.Start(t)
	nc, err := natsbus.Connect(srv.URL, name, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestPruneRunsWhileTheRelayIsBusy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, _ := dbtest.New(t, postgres.Options{})
	pool := dbtest.SQL(db)
	f := seedPrune(t, ctx, pool, 25)
	// A backlog of unsent events relayed one a round keeps every round full.
	insertUnsent(t, ctx, pool, 3000)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	js := relayJetStream(t, "prune-test", quiet)
	out := &countingOutbox{Outbox: postgres.NewStore(db, "us-east", time.Minute), batch: 1}
	relay := natsbus.NewRelay(js, out, natsbus.RelayConfig{Region: "us-east", Batch: 1, PruneBatch: 10, Log: quiet})
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { relay.Run(run) })
	defer func() { stop(); wg.Wait() }()
	for len(outboxLeft(t, ctx, pool, f.expired)) > 0 {
		if ctx.Err() != nil {
			t.Fatal("expired rows never pruned")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := out.partial.Load(); n != 0 {
		t.Fatalf("the relay had %d rounds that were not full before prune caught up: it was not kept busy", n)
	}
	if left := outboxLeft(t, ctx, pool, f.kept); len(left) != len(f.kept) {
		t.Fatalf("prune deleted %d rows it must keep", len(f.kept)-len(left))
	}
}
