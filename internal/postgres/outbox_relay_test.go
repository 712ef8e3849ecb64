package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// writeOutboxEvent appends one event of partition pid to the outbox in a
// transaction of its own, as a booking transaction does.
func writeOutboxEvent(ctx context.Context, pool *pgxpool.Pool, pid, region string, seq int) (string, error) {
	id := uuid.NewString()
	_, err := pool.Exec(ctx, `INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type,
		aggregate_id, aggregate_version, seq, payload) VALUES ($1, $2, $3, 'hotel', 'test.event', $4, 1, $5, '{}')`,
		pid, id, region, uuid.NewString(), seq)
	return id, err
}

// relayLog records what racing relays handed to the broker and what it
// acknowledged, in the order it happened.
type relayLog struct {
	mu      sync.Mutex
	firstAt map[string]int // event id → position of its first acknowledgement
	order   []events.Record
	acks    int
	batches []string // every acknowledged batch as partition:seq, shown when the order breaks
}

func (l *relayLog) ack(recs []events.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d []string
	for _, r := range recs {
		d = append(d, fmt.Sprintf("%s:%d", r.PartitionID[:4], r.Seq))
	}
	l.batches = append(l.batches, fmt.Sprint(len(l.order), d))
	for _, r := range recs {
		l.acks++
		if _, ok := l.firstAt[r.EventID]; !ok {
			l.firstAt[r.EventID] = len(l.order)
			l.order = append(l.order, r)
		}
	}
}

// Several relay replicas of one region race each other and the writers,
// and their publishes fail in every way the broker and the process can
// fail: a whole batch refused, a partition's tail refused (the relay acks a
// prefix per partition), a crash before the broker answered and a crash
// after it stored the batch. Every event must reach the broker at least
// once, and each partition's events must first reach it in the order they
// were written: a replica must never publish a partition's event while an
// earlier one is claimed by another replica or not yet claimed.
func TestRelayKeepsOrderAndLosesNothingUnderRacingReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	pool := dbtest.SQL(db)
	const (
		partitions = 6
		perPart    = 40
		replicas   = 4
		batch      = 7 // small, so that a partition's events span rounds and replicas
	)
	store := postgres.NewStore(db, "us-east", time.Minute)

	// One writer per partition writes its events one after another, so
	// their (created_at, seq) order is their commit order: the order the
	// broker must first see them in.
	written := map[string][]string{} // partition → event ids in writing order
	var wmu sync.Mutex
	var writers sync.WaitGroup
	for p := 0; p < partitions; p++ {
		pid := uuid.NewString()
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; i < perPart; i++ {
				id, err := writeOutboxEvent(ctx, pool, pid, "us-east", i)
				if err != nil {
					t.Error(err)
					return
				}
				wmu.Lock()
				written[pid] = append(written[pid], id)
				wmu.Unlock()
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { writers.Wait(); close(writersDone) }()

	log := &relayLog{firstAt: map[string]int{}}
	publish := func(_ context.Context, recs []events.Record) ([]string, error) {
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // hold the claim while others race
		switch n := rand.IntN(100); {
		case n < 4:
			panic("relay crashed before the broker answered")
		case n < 8:
			log.ack(recs)
			panic("relay crashed after the broker stored the batch")
		case n < 16:
			return nil, errors.New("broker refused the batch")
		case n < 28:
			// The broker refused one event: the relay acks, per partition,
			// the events before that partition's first failure.
			bad := recs[rand.IntN(len(recs))].PartitionID
			keep := rand.IntN(len(recs)) // of bad's events, those before its failure
			var acked []events.Record
			for _, r := range recs {
				if r.PartitionID == bad {
					if keep == 0 {
						continue
					}
					keep--
				}
				acked = append(acked, r)
			}
			log.ack(acked)
			ids := make([]string, len(acked))
			for i, r := range acked {
				ids[i] = r.EventID
			}
			return ids, errors.New("broker refused an event")
		}
		log.ack(recs)
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.EventID
		}
		return ids, nil
	}
	round := func() {
		defer func() { _ = recover() }() // a crashed replica's next round is a restarted one
		_, _ = store.RelayOutbox(ctx, batch, publish)
	}

	deadline := time.Now().Add(60 * time.Second)
	var relays sync.WaitGroup
	for r := 0; r < replicas; r++ {
		relays.Add(1)
		go func() {
			defer relays.Done()
			for time.Now().Before(deadline) {
				round()
				select {
				case <-writersDone:
					if n, err := store.UnsentOutbox(ctx); err == nil && n == 0 {
						return
					}
				default:
				}
			}
		}()
	}
	relays.Wait()
	if t.Failed() {
		return
	}
	if n, err := store.UnsentOutbox(ctx); err != nil || n != 0 {
		t.Fatalf("the relays stopped with %d events unsent (err %v)", n, err)
	}
	total := 0
	for pid, ids := range written {
		total += len(ids)
		last := -1
		for i, id := range ids {
			at, ok := log.firstAt[id]
			if !ok {
				t.Fatalf("partition %s: event %d of %d never reached the broker", pid, i, len(ids))
			}
			if at < last {
				for _, d := range log.batches {
					t.Log(d)
				}
				t.Fatalf("partition %s: event %d first reached the broker after event %d (positions %d < %d)", pid, i, i-1, at, last)
			}
			last = at
		}
	}
	if total != partitions*perPart || len(log.firstAt) != total {
		t.Fatalf("wrote %d events, the broker saw %d distinct", total, len(log.firstAt))
	}
	t.Logf("%d events, %d acknowledgements (duplicates are the crashed rounds')", total, log.acks)
}

// A moved partition's events keep the region that wrote them: the new home's
// relay must not publish the partition's later events before the former
// home's relay has published the earlier ones.
func TestRelayWaitsForAMovedPartitionsFormerHome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	pool := dbtest.SQL(db)
	east, west := postgres.NewStore(db, "us-east", time.Minute), postgres.NewStore(db, "eu-west", time.Minute)
	moved, other := uuid.NewString(), uuid.NewString()
	early, err := writeOutboxEvent(ctx, pool, moved, "eu-west", 0) // written before the move
	if err != nil {
		t.Fatal(err)
	}
	late, err := writeOutboxEvent(ctx, pool, moved, "us-east", 0) // after it
	if err != nil {
		t.Fatal(err)
	}
	bystander, err := writeOutboxEvent(ctx, pool, other, "us-east", 0)
	if err != nil {
		t.Fatal(err)
	}
	relay := func(s *postgres.Store) []string {
		t.Helper()
		var got []string
		if _, err := s.RelayOutbox(ctx, 100, func(_ context.Context, recs []events.Record) ([]string, error) {
			for _, r := range recs {
				got = append(got, r.EventID)
			}
			return got, nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := relay(east); fmt.Sprint(got) != fmt.Sprint([]string{bystander}) {
		t.Fatalf("the new home published %v before the former home published %s; want only the other partition's %s", got, early, bystander)
	}
	if got := relay(west); fmt.Sprint(got) != fmt.Sprint([]string{early}) {
		t.Fatalf("the former home published %v, want %s", got, early)
	}
	if got := relay(east); fmt.Sprint(got) != fmt.Sprint([]string{late}) {
		t.Fatalf("after the former home, the new home published %v, want %s", got, late)
	}
}
