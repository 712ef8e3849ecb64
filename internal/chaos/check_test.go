package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// check is one assertion of the final audit.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Info marks a line that is reported, never failed on.
	Info bool `json:"info,omitempty"`
}

// bookingAudit compares every recorded outcome with the database.
type bookingAudit struct {
	Holds            int `json:"holds"`
	OKExactlyOnce    int `json:"ok_exactly_once"`
	Lost             int `json:"lost"`       // ok but absent
	Duplicated       int `json:"duplicated"` // more than one row for one hold
	Mismatched       int `json:"mismatched"` // exists under another id
	RefusedAbsent    int `json:"refused_absent"`
	Phantom          int `json:"phantom"` // refused, yet it exists
	UnresolvedExist  int `json:"unresolved_exist"`
	UnresolvedAbsent int `json:"unresolved_absent"`
	WrongState       int `json:"wrong_state"`
	Examples         []string
}

type resRow struct{ id, status string }

// rowsByGuest runs query, which selects (guest, id, status), and groups the
// rows by guest: the audits of reservations and of appointments read the
// database the same way.
func rowsByGuest(ctx context.Context, db *postgres.DB, query string) (map[string][]resRow, error) {
	rows, err := dbtest.SQL(db).Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byGuest := map[string][]resRow{}
	for rows.Next() {
		var g string
		var r resRow
		if err := rows.Scan(&g, &r.id, &r.status); err != nil {
			return nil, err
		}
		byGuest[g] = append(byGuest[g], r)
	}
	return byGuest, rows.Err()
}

func auditBookings(ctx context.Context, db *postgres.DB, chains []*chain) (bookingAudit, error) {
	var a bookingAudit
	byGuest, err := rowsByGuest(ctx, db, `SELECT guest_id, reservation_id::TEXT, status FROM reservations WHERE guest_id LIKE 'chaos-%'`)
	if err != nil {
		return a, fmt.Errorf("read reservations: %w", err)
	}
	example := func(format string, args ...any) {
		if len(a.Examples) < 10 {
			a.Examples = append(a.Examples, fmt.Sprintf(format, args...))
		}
	}
	for _, c := range chains {
		a.Holds++
		h := c.Hold
		got := byGuest[h.Guest]
		if len(got) > 1 {
			a.Duplicated++
			example("hold %s (%s): %d reservations", h.Key, h.Final, len(got))
			continue
		}
		switch h.Final {
		case outOK:
			switch {
			case len(got) == 0:
				a.Lost++
				example("hold %s answered %d %s but no reservation exists", h.Key, h.Status, h.ResID)
				continue
			case got[0].id != h.ResID:
				a.Mismatched++
				example("hold %s answered %s but the reservation is %s", h.Key, h.ResID, got[0].id)
				continue
			}
			a.OKExactlyOnce++
			if want := allowedStates(c); !want[got[0].status] {
				a.WrongState++
				example("reservation %s is %s; outcomes allow %v", h.ResID, got[0].status, keys(want))
			}
		case outRejected, outFailed:
			if len(got) == 0 {
				a.RefusedAbsent++
			} else {
				a.Phantom++
				example("hold %s was refused (%d %s) but reservation %s exists", h.Key, h.Status, h.Code, got[0].id)
			}
		case outUnknown:
			if len(got) == 0 {
				a.UnresolvedAbsent++
			} else {
				a.UnresolvedExist++
			}
		}
	}
	return a, nil
}

// allowedStates is what a reservation may be in given what its client
// learned: a definite outcome fixes the state; an unresolved one allows
// both the state before and after it.
func allowedStates(c *chain) map[string]bool {
	states := map[string]bool{"held": true}
	apply := func(o *op, to string) {
		if o == nil {
			return
		}
		switch o.Final {
		case outOK:
			states = map[string]bool{to: true}
		case outUnknown:
			states[to] = true
		}
	}
	apply(c.Confirm, "confirmed")
	apply(c.Cancel, "cancelled")
	return states
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// streamAudit compares one kind's events of the outbox with the stream.
type streamAudit struct {
	Outbox     int `json:"outbox_events"`
	Unsent     int `json:"unsent"`
	InStream   int `json:"stream_messages"`
	Duplicates int `json:"duplicates"` // one event id stored twice
	Missing    int `json:"missing"`    // marked sent, not in the stream
	DrainedIn  string
}

// auditStream waits until the outbox of one kind's events (hotel, clinic)
// is drained, then reads that kind's whole stream and compares event ids.
func auditStream(ctx context.Context, db *postgres.DB, natsAddr, kind string, within time.Duration) (streamAudit, error) {
	var a streamAudit
	start := time.Now()
	for {
		if err := dbtest.SQL(db).QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE sent_at IS NULL) FROM outbox WHERE kind = $1`, kind).
			Scan(&a.Outbox, &a.Unsent); err != nil {
			return a, err
		}
		if a.Unsent == 0 || time.Since(start) > within {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	a.DrainedIn = time.Since(start).Round(10 * time.Millisecond).String()
	sent := map[string]bool{}
	rows, err := dbtest.SQL(db).Query(ctx, `SELECT event_id::TEXT FROM outbox WHERE kind = $1 AND sent_at IS NOT NULL`, kind)
	if err != nil {
		return a, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return a, err
		}
		sent[id] = true
	}
	rows.Close()
	nc, err := nats.Connect("nats://"+natsAddr, nats.Timeout(5*time.Second))
	if err != nil {
		return a, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return a, err
	}
	subject := "berth." + kind + ".>"
	total, err := subjectCount(ctx, js, subject)
	if err != nil {
		return a, err
	}
	cons, err := js.OrderedConsumer(ctx, "BERTH_EVENTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return a, err
	}
	seen := map[string]int{}
	deadline := time.Now().Add(within)
	for int64(a.InStream) < total && time.Now().Before(deadline) {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return a, err
		}
		for m := range batch.Messages() {
			a.InStream++
			seen[m.Headers().Get(jetstream.MsgIDHeader)]++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return a, err
		}
	}
	for _, n := range seen {
		if n > 1 {
			a.Duplicates += n - 1
		}
	}
	for id := range sent {
		if seen[id] == 0 {
			a.Missing++
		}
	}
	return a, nil
}

// readModelConvergence runs `readmodel verify` until it reports zero
// differences or the budget runs out.
func readModelConvergence(ctx context.Context, bin, dbURL string, within time.Duration) (bool, time.Duration, string) {
	start := time.Now()
	var last string
	for {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		out, err := runBin(cctx, filepath.Join(bin, "readmodel"), []string{"BERTH_DATABASE_URL=" + dbURL}, "verify")
		cancel()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last = lines[len(lines)-1]
		if err == nil {
			return true, time.Since(start), last
		}
		var ee *exec.ExitError
		if !asExit(err, &ee) || time.Since(start) > within {
			return false, time.Since(start), tail(out, 1500)
		}
		time.Sleep(time.Second)
	}
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok
}

// lagWatch measures, per fault, when the first booking made after healing
// appears in the read model: how long the event path took to recover.
type lagWatch struct {
	db   *postgres.DB
	mu   sync.Mutex
	got  map[int]time.Duration
	done chan struct{}
	wg   sync.WaitGroup
}

func newLagWatch(db *postgres.DB) *lagWatch {
	return &lagWatch{db: db, got: map[int]time.Duration{}, done: make(chan struct{})}
}

// add starts watching for one booking (bounded: 5 minutes).
func (w *lagWatch) add(i int, s success, healed time.Time) {
	w.wg.Go(func() {
		deadline := time.Now().Add(5 * time.Minute)
		for time.Now().Before(deadline) {
			var ok bool
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := dbtest.SQL(w.db).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM rm_reservations WHERE kind = 'hotel' AND partition_id = $1 AND id = $2)`,
				s.HotelID, s.ResID).Scan(&ok)
			cancel()
			if err == nil && ok {
				w.mu.Lock()
				w.got[i] = time.Since(healed)
				w.mu.Unlock()
				return
			}
			select {
			case <-w.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// wait gives the watchers up to budget more, then stops them.
func (w *lagWatch) wait(budget time.Duration) map[int]time.Duration {
	finished := make(chan struct{})
	go func() { w.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(budget):
		close(w.done)
		<-finished
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got
}
