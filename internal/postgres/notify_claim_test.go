package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/jackc/pgx/v5"
)

// A claim commits on the server as its statement ends. A caller whose
// context ends meanwhile (a read model shutting down) must not leave rows
// in 'sending' that it was never given: nothing would send them again.
// Claims are cancelled at random moments, from before the statement is sent
// to after it returned; after each, every row in 'sending' is one the claim
// returned.
func TestClaimCancelledLeavesNoRowClaimedUnreturned(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.New(t, postgres.Options{})
	q := postgres.NewNotifications(db)
	sql := dbtest.SQL(db)
	bg := context.Background()
	const rounds = 400
	cancelled, early := 0, 0
	for i := range rounds {
		key := fmt.Sprintf("claim-%d", i)
		if err := q.Queue(bg, "g", []postgres.Notification{{Key: key, Channel: "email", Template: "held", To: "g@example.com",
			Subject: "s", Body: "b"}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		var fired atomic.Bool
		go func() {
			time.Sleep(time.Duration(rand.IntN(250)) * time.Microsecond)
			fired.Store(true)
			cancel()
		}()
		got, claimErr := q.Claim(ctx, 10)
		if fired.Load() {
			early++ // the context ended before the claim returned
		}
		cancel()
		if claimErr != nil {
			cancelled++
		}
		returned := map[string]bool{}
		for _, c := range got {
			returned[c.Key] = true
		}
		rows, _ := sql.Query(bg, `SELECT message_key FROM notify_messages WHERE status = 'sending'`)
		sending, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range sending {
			if !returned[k] {
				t.Errorf("round %d: %s left in 'sending', not returned by the claim (claim error: %v)", i, k, claimErr)
			}
		}
		// What the claim returned is recorded, as Dispatch does.
		for k := range returned {
			if err := q.Sent(bg, k, "email"); err != nil {
				t.Fatal(err)
			}
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d of %d claims had their context end before they returned, %d of them before they began", early, rounds, cancelled)
	if early < rounds/40 {
		t.Fatalf("only %d of %d claims had their context end before they returned: the race was not run", early, rounds)
	}
}
