package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lockNow runs stmt (a FOR UPDATE or an UPDATE of rows another transaction
// may have locked) in a fresh transaction whose lock_timeout makes a lock
// still held fail with 55P03 instead of waiting: the proof that a lock is
// free is taking it, not a measured time.
func lockNow(t *testing.T, db *postgres.DB, stmt string, args ...any) error {
	t.Helper()
	ctx := context.Background()
	tx, err := dbtest.SQL(db).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '3s'`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, stmt, args...)
	return err
}

func stayOf(t *testing.T, in, out string) reservation.Stay {
	t.Helper()
	ci, err1 := reservation.ParseDate(in)
	co, err2 := reservation.ParseDate(out)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	return reservation.Stay{CheckIn: ci, CheckOut: co}
}

func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// mustPanic runs f and returns what it panicked with; no panic fails.
func mustPanic(t *testing.T, f func()) (v any) {
	t.Helper()
	defer func() { v = recover() }()
	f()
	t.Fatal("no panic")
	return nil
}

// Finding 9 of issue 13: a panic inside InTx rolled nothing back — the
// deferred rollback looked only at the error — so the pooled connection
// stayed checked out with its row locks held. Now the transaction rolls
// back, the panic goes on to the caller, and the lock is free at once.
func TestPanicInTransactionReleasesLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	for _, stmt := range []string{
		`CREATE TABLE counter (id INT8 PRIMARY KEY, n INT8 NOT NULL)`,
		`INSERT INTO counter VALUES (1, 0)`,
	} {
		if _, err := dbtest.SQL(db).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	v := mustPanic(t, func() {
		_ = db.InTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE counter SET n = n + 1 WHERE id = 1`); err != nil {
				return err
			}
			panic("boom")
		})
	})
	if v != "boom" {
		t.Fatalf("panicked with %v, want the original panic", v)
	}
	if err := lockNow(t, db, `SELECT n FROM counter WHERE id = 1 FOR UPDATE`); err != nil {
		if isLockTimeout(err) {
			t.Fatal("the row lock of the panicked transaction is still held")
		}
		t.Fatal(err)
	}
	var n int
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT n FROM counter WHERE id = 1`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the panicked transaction's update committed: n = %d", n)
	}
	if got := db.PoolStats().Acquired; got != 0 {
		t.Fatalf("%d connection(s) still checked out of the pool", got)
	}
}

// The store's write path: a panic while rendering the stored answer (once
// mustJSON's) happens after the nights were taken. The nights' locks must be
// free at once and nothing may be left taken.
func TestPanicInWritePathReleasesNights(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(30))
	stay := stayOf(t, bookingtest.Date(5), bookingtest.Date(8))
	before := env.MustSnapshot()
	mustPanic(t, func() {
		_, _ = env.Store.Hold(context.Background(), reservation.HoldRequest{
			ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID, GuestID: "g", Stay: stay, Quantity: 2,
		}, &berth.Idem{Key: uuid.NewString(), Hash: "h", Render: func(any, error) (int, []byte) { panic("render") }})
	})
	if err := lockNow(t, env.DB, `UPDATE room_inventory SET reserved = reserved WHERE hotel_id = $1`, h.ID); err != nil {
		if isLockTimeout(err) {
			t.Fatal("the nights taken by the panicked hold are still locked")
		}
		t.Fatal(err)
	}
	if env.MustSnapshot() != before {
		t.Fatal("the panicked hold left changes behind")
	}
}

// An answer that cannot be rendered (Render reports a 5xx) is a failure of
// the write, not an answer to store under the key: the transaction rolls
// back and the caller gets an error.
func TestFailedRenderRollsBack(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(30))
	stay := stayOf(t, bookingtest.Date(5), bookingtest.Date(8))
	before := env.MustSnapshot()
	_, err := env.Store.Hold(context.Background(), reservation.HoldRequest{
		ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID, GuestID: "g", Stay: stay, Quantity: 1,
	}, &berth.Idem{Key: uuid.NewString(), Hash: "h", Render: func(any, error) (int, []byte) { return 500, []byte(`{}`) }})
	if err == nil {
		t.Fatal("a hold whose answer could not be rendered succeeded")
	}
	if env.MustSnapshot() != before {
		t.Fatal("a hold whose answer could not be rendered left changes (or a stored 500) behind")
	}
}

// The outbox relay holds its claim (row locks, SKIP LOCKED) across the
// publish; a panic in publish must release the claim at once so the next
// round publishes the same events.
func TestRelayPanicReleasesClaim(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(30))
	ctx := context.Background()
	// A hold writes its events to the outbox.
	if _, err := env.Store.Hold(ctx, reservation.HoldRequest{ReservationID: uuid.NewString(), HotelID: h.ID, RoomTypeID: h.RoomTypeID,
		GuestID: "g", Stay: stayOf(t, bookingtest.Date(5), bookingtest.Date(6)), Quantity: 1}, nil); err != nil {
		t.Fatal(err)
	}
	mustPanic(t, func() {
		_, _ = env.Store.RelayOutbox(ctx, 100, func(context.Context, []events.Record) ([]string, error) { panic("publish") })
	})
	var claimed int
	sent, err := env.Store.RelayOutbox(ctx, 100, func(_ context.Context, recs []events.Record) ([]string, error) {
		claimed = len(recs)
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.EventID
		}
		return ids, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if claimed == 0 || sent != claimed {
		t.Fatalf("after a panicked round the next claimed %d and sent %d events; the claim was never released", claimed, sent)
	}
}

// The pool sets idle_in_transaction_session_timeout, the last fence behind
// the helpers: a session left idle inside a transaction (a bug we did not
// foresee) is ended by the server and its locks released.
func TestPoolSetsIdleInTransactionTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{IdleInTxTimeout: time.Second})
	// SHOW on the store's own pool (dbtest.SQL is a pool of the test's).
	show := func(db *postgres.DB) string {
		var v string
		if err := db.InTx(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&v)
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := show(db); v != "1s" && v != "1000ms" && v != "1000" {
		t.Fatalf("idle_in_transaction_session_timeout = %q, want 1s", v)
	}
	dflt, _ := dbtest.New(t, postgres.Options{})
	if v := show(dflt); v == "0" || v == "0s" || v == "" {
		t.Fatalf("the default pool leaves idle_in_transaction_session_timeout off (%q)", v)
	}
	for _, stmt := range []string{`CREATE TABLE t (id INT8 PRIMARY KEY)`, `INSERT INTO t VALUES (1)`} {
		if _, err := dbtest.SQL(db).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	// A transaction of the store's takes the lock and then sits idle while
	// its Go code waits, as a leaked one would.
	locked, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.InTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT id FROM t WHERE id = 1 FOR UPDATE`); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	// The other transaction waits (up to its lock_timeout of 3s, three times
	// the idle timeout) and gets the lock once the server ends the idle one.
	err := lockNow(t, db, `SELECT id FROM t WHERE id = 1 FOR UPDATE`)
	close(release)
	if err != nil {
		t.Fatalf("the idle transaction kept its lock: %v", err)
	}
	if err := <-done; err == nil {
		t.Fatal("the transaction the server ended reported success")
	}
}
