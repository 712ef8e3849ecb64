package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/readmodel"
	"github.com/berthhq/berth/internal/view"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The projection applies the events that arrive together in rounds of one
// statement (docs/adr/0021-read-model-rounds.md). These tests drive the
// whole read model (`run`) from a real JetStream (in process) into the real
// PostgreSQL, publishing the events themselves so that they control
// redeliveries, versions out of order and poison.

// roundStack is the read model alone on a fresh database and NATS server.
type roundStack struct {
	*stack
	js      jetstream.JetStream
	nc      *nats.Conn
	proj    *readmodel.Projector
	applied sync.Map // event id → *atomic.Int32: fresh applications seen by OnApplied
}

func newRoundStack(t *testing.T) *roundStack {
	t.Helper()
	db, dbURL := dbtest.New(t, postgres.Options{MaxConns: 16})
	s := &stack{t: t, db: db, dbURL: dbURL, nats: natstest.Start(t), quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t.Cleanup(s.stopReadModel)
	nc, err := nats.Connect(s.nats.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsbus.EnsureStream(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	return &roundStack{stack: s, js: js, nc: nc}
}

// start runs the read model (its default workers, so the rounds are as
// large as in production), observing its projector.
func (r *roundStack) start(tweak func(*serveConfig)) {
	r.startReadModel(func(c *serveConfig) {
		c.Workers = defaultWorkers
		c.Projector = func(st *postgres.ReadModel, log *slog.Logger) *readmodel.Projector {
			r.proj = readmodel.NewProjector(st, log)
			r.proj.OnApplied = func(it view.Item, _ time.Time) {
				// The item does not name its event: count by row and version.
				n, _ := r.applied.LoadOrStore(fmt.Sprintf("%s/%d", it.ID, it.Version), new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			}
			return r.proj
		}
		if tweak != nil {
			tweak(c)
		}
	})
}

// event is one reservation event as a booking service would publish it.
type event struct {
	id, resv, guest, status string
	version                 int64
}

var statusOf = []string{"", "held", "confirmed", "checked_in", "checked_out"}

// events makes n reservations of versions 1..4 each, in random order.
func reservationEvents(n int, rng *rand.Rand) []event {
	var out []event
	for i := range n {
		for v := int64(1); v <= 4; v++ {
			out = append(out, event{id: fmt.Sprintf("ev-%d-%d", i, v), resv: fmt.Sprintf("r-%d", i),
				guest: fmt.Sprintf("g-%d", i%9), status: statusOf[v], version: v})
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// publish sends e under its own message id plus copy, so that copies are
// delivered again (as a relay's republish after a crash, or a redelivery,
// would be) and the projection must find them duplicates.
func (r *roundStack) publish(e event, copy int) {
	r.t.Helper()
	data, _ := json.Marshal(map[string]any{"reservation_id": e.resv, "hotel_id": "h-1", "guest_id": e.guest,
		"check_in": "2027-03-01", "check_out": "2027-03-03", "quantity": 1, "status": e.status, "version": e.version,
		"updated_at": time.Now().UTC(), "contact_email": e.guest + "@example.com"})
	typ := "reservation." + e.status
	body, _ := json.Marshal(events.FromRecord(events.Record{PartitionID: "h-1", EventID: e.id, Kind: "hotel", Type: typ,
		AggregateID: e.resv, AggregateVersion: e.version, Payload: data, CreatedAt: time.Now()}))
	m := nats.NewMsg(events.Subject("hotel", "h-1", typ))
	m.Data = body
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.js.PublishMsg(ctx, m, jetstream.WithMsgID(fmt.Sprintf("%s#%d", e.id, copy))); err != nil {
		r.t.Fatal(err)
	}
}

// publishAll publishes every event twice, from 8 goroutines at once.
func (r *roundStack) publishAll(evs []event) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				r.publish(evs[i/2], i%2)
			}
		})
	}
	for i := range 2 * len(evs) {
		next <- i
	}
	close(next)
	wg.Wait()
}

// settled waits until the projection has no message pending and has
// marked want events, then checks the view: every reservation at its
// newest version, every event applied once in effect — seen fresh exactly
// once, or at most once when exact is false (a statement whose commit
// was cut off may have applied its events unseen: the redelivery then finds
// them done).
func (r *roundStack) settled(evs []event, within time.Duration, exact bool) {
	r.t.Helper()
	want := map[string]bool{}
	for _, e := range evs {
		want[e.id] = true
	}
	eventually(r.t, within, "every event projected", func() bool {
		var n int
		_ = dbtest.SQL(r.db).QueryRow(context.Background(), `SELECT count(*) FROM rm_processed_events WHERE consumer = 'readmodel'`).Scan(&n)
		p, err := natsbus.Pending(context.Background(), r.js, readmodel.ConsumerName)
		return n >= len(want) && err == nil && p == 0
	})
	var marks int
	_ = dbtest.SQL(r.db).QueryRow(context.Background(), `SELECT count(*) FROM rm_processed_events WHERE consumer = 'readmodel'`).Scan(&marks)
	if marks != len(want) {
		r.t.Errorf("%d events marked processed, want %d", marks, len(want))
	}
	rows, err := dbtest.SQL(r.db).Query(context.Background(), `SELECT id, status, version, contact_email FROM rm_reservations`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var (
			id, status, email string
			version           int64
		)
		if err := rows.Scan(&id, &status, &version, &email); err != nil {
			r.t.Fatal(err)
		}
		seen++
		if version != 4 || status != statusOf[4] || email == "" {
			r.t.Errorf("reservation %s: %s v%d (%q); want its newest version, %s v4", id, status, version, email, statusOf[4])
		}
	}
	if seen != len(want)/4 {
		r.t.Errorf("%d reservations in the view, want %d", seen, len(want)/4)
	}
	// Exactly once in effect: OnApplied saw each event fresh once.
	for _, e := range evs {
		n, ok := r.applied.Load(fmt.Sprintf("%s/%d", e.resv, e.version))
		got := int32(0)
		if ok {
			got = n.(*atomic.Int32).Load()
		}
		if got > 1 || (exact && got != 1) {
			r.t.Errorf("event %s applied fresh %d times, want once", e.id, got)
		}
	}
}

// deadLetters counts the read model's dead letters from now on.
func (r *roundStack) deadLetters() *atomic.Int32 {
	r.t.Helper()
	var n atomic.Int32
	sub, err := r.nc.Subscribe("berth.dlq.readmodel.>", func(*nats.Msg) { n.Add(1) })
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return &n
}

// Every event is applied exactly once in effect although each is delivered
// twice, versions arrive out of order and the events of one reservation
// race in the same and in concurrent rounds: half the stream waits as a
// backlog when the read model starts, the other half is published while it
// runs.
func TestRoundsApplyEveryEventOnceInEffect(t *testing.T) {
	r := newRoundStack(t)
	dead := r.deadLetters()
	evs := reservationEvents(150, rand.New(rand.NewPCG(1, 2)))
	r.publishAll(evs[:len(evs)/2])
	r.start(nil)
	r.publishAll(evs[len(evs)/2:])
	r.settled(evs, 60*time.Second, true)
	rounds, carried, failed := r.proj.Rounds()
	t.Logf("%d events (each delivered twice): %d rounds of several carried %d deliveries, %d failed", len(evs), rounds, carried, failed)
	if rounds == 0 || carried < 2*rounds {
		t.Errorf("no rounds of several events (%d rounds, %d events): the test did not test rounds", rounds, carried)
	}
	if failed != 0 || dead.Load() != 0 {
		t.Errorf("%d rounds failed, %d dead letters; want none", failed, dead.Load())
	}
}

// A round takes what is pending, not a fixed few: while a round's
// statement waits (here on a lock the test holds on the processed marks),
// the events the consumer hands over wait in it or queue for the next, and
// once the lock goes they are applied in one round or two. Each worker's
// event waits in its round, so the workers bound what can wait: with the
// 16 workers of before, 16 events at most, and 64 events took at least four
// rounds.
func TestRoundsTakeWhatIsPending(t *testing.T) {
	r := newRoundStack(t)
	dead := r.deadLetters()
	ctx := context.Background()
	const n = 64
	var evs []event
	for i := range n {
		e := event{id: fmt.Sprintf("ev-%d-1", i), resv: fmt.Sprintf("r-%d", i), guest: fmt.Sprintf("g-%d", i%9), status: "held", version: 1}
		evs = append(evs, e)
		r.publish(e, 0)
	}
	lock, err := dbtest.SQL(r.db).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	// SHARE mode lets the view be read and stops every insert of a mark.
	if _, err := lock.Exec(ctx, `LOCK TABLE rm_processed_events IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	r.start(nil)
	const waiting = 48
	// Within the round's own timeout (15 s), which would fail the round.
	eventually(t, 10*time.Second, fmt.Sprintf("%d events waiting on the blocked round", waiting), func() bool {
		return r.proj != nil && r.proj.Waiting() >= waiting
	})
	rounds0, carried0, _ := r.proj.Rounds()
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "every event projected", func() bool {
		var marks int
		_ = dbtest.SQL(r.db).QueryRow(ctx, `SELECT count(*) FROM rm_processed_events WHERE consumer = 'readmodel'`).Scan(&marks)
		return marks == n
	})
	rounds1, carried1, failed := r.proj.Rounds()
	rounds, carried := rounds1-rounds0, carried1-carried0
	t.Logf("after the lock: %d rounds of several carried %d events", rounds, carried)
	// The blocked round and the one that took the queue behind it, perhaps
	// one more for events that came after that one was taken: 16 a round
	// would take four.
	if carried < waiting || rounds > 3 {
		t.Errorf("%d rounds carried %d events; want the %d waiting events in at most 3 rounds", rounds, carried, waiting)
	}
	if failed != 0 || dead.Load() != 0 {
		t.Errorf("%d rounds failed, %d dead letters; want none", failed, dead.Load())
	}
	for _, e := range evs {
		if n, ok := r.applied.Load(fmt.Sprintf("%s/%d", e.resv, e.version)); !ok || n.(*atomic.Int32).Load() != 1 {
			t.Errorf("event %s not applied exactly once", e.id)
		}
	}
}

// A poison event — one the database refuses: a NUL byte in its guest id —
// sent in a backlog among good ones fails its round, and fails alone: its
// round-mates are applied, it alone is retried up to the limit and
// dead-lettered.
func TestPoisonEventFailsAloneNotItsRound(t *testing.T) {
	// Whether the poison event lands in a round of several depends on how
	// the deliveries interleave with the statements; on a loaded machine it
	// may come alone. Such an attempt tests nothing about rounds (it still
	// checks the dead letter and the good events), so it is run again, on a
	// fresh stack, up to three times.
	for attempt := 1; ; attempt++ {
		var shared bool
		t.Run(fmt.Sprintf("attempt_%d", attempt), func(t *testing.T) { shared = poisonRound(t) })
		if shared || t.Failed() {
			return
		}
		if attempt == 3 {
			t.Fatal("in three attempts the poison event never shared a round: the test did not test a failing round")
		}
		t.Logf("attempt %d: the poison event came alone; again", attempt)
	}
}

func poisonRound(t *testing.T) (shared bool) {
	r := newRoundStack(t)
	var poisoned []string
	dlq := make(chan *nats.Msg, 4)
	sub, err := r.nc.ChanSubscribe("berth.dlq.readmodel.>", dlq)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	evs := reservationEvents(60, rand.New(rand.NewPCG(3, 4)))
	poison := event{id: "ev-poison", resv: "r-poison", guest: "g\x00poison", status: "held", version: 1}
	for i, e := range evs {
		r.publish(e, 0)
		if i == len(evs)/3 {
			r.publish(poison, 0)
			poisoned = append(poisoned, poison.id)
		}
	}
	r.start(nil)
	select {
	case m := <-dlq:
		var e events.Envelope
		_ = json.Unmarshal(m.Data, &e)
		if e.ID != poison.id || m.Header.Get("Berth-Dlq-Deliveries") != "5" {
			t.Errorf("dead letter of %s after %s deliveries; want %s after 5", e.ID, m.Header.Get("Berth-Dlq-Deliveries"), poison.id)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the poison event was not dead-lettered")
	}
	r.settled(evs, 60*time.Second, true)
	var marked int
	_ = dbtest.SQL(r.db).QueryRow(context.Background(), `SELECT count(*) FROM rm_processed_events WHERE event_id = $1`, poison.id).Scan(&marked)
	if marked != 0 {
		t.Error("the poison event was marked processed")
	}
	rounds, carried, failed := r.proj.Rounds()
	t.Logf("%d good events and %v: %d rounds of several carried %d, %d failed", len(evs), poisoned, rounds, carried, failed)
	select {
	case m := <-dlq:
		t.Errorf("a second dead letter: %s", m.Data)
	default:
	}
	return failed > 0
}

// The database goes away in the middle of a stream of events (every
// connection cut, new ones refused, for two seconds) and comes back:
// rounds and lone applications fail meanwhile, yet nothing is lost,
// nothing is dead-lettered, and every event is applied once in effect.
func TestDatabaseOutageMidRoundLosesNothing(t *testing.T) {
	r := newRoundStack(t)
	dead := r.deadLetters()
	px := startCutProxy(t, r.dbURL)
	r.start(func(c *serveConfig) { c.DatabaseURL = px.url })
	evs := reservationEvents(200, rand.New(rand.NewPCG(5, 6)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, e := range evs {
			r.publish(e, 0)
			if i%20 == 19 {
				time.Sleep(25 * time.Millisecond) // a steady stream, about 2 s long
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	cut := px.down()
	time.Sleep(2 * time.Second)
	px.up()
	<-done
	r.settled(evs, 90*time.Second, false)
	rounds, carried, failed := r.proj.Rounds()
	t.Logf("outage cut %d connections; %d rounds of several carried %d, %d failed", cut, rounds, carried, failed)
	if cut == 0 {
		t.Error("the outage cut no connection: the test did not test an outage")
	}
	if dead.Load() != 0 {
		t.Errorf("%d dead letters after a database outage; want none", dead.Load())
	}
}

// cutProxy forwards TCP to the database until down() cuts every
// connection; while down it refuses new ones (accepts and closes them).
type cutProxy struct {
	url    string
	target string
	mu     sync.Mutex
	isDown bool
	conns  map[net.Conn]bool
}

func startCutProxy(t *testing.T, dbURL string) *cutProxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{target: u.Host, conns: map[net.Conn]bool{}}
	u.Host = ln.Addr().String()
	p.url = u.String()
	t.Cleanup(func() { ln.Close(); p.down() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.isDown {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.isDown {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// down cuts every connection and refuses new ones; it returns how many
// connections it cut.
func (p *cutProxy) down() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = true
	n := len(p.conns) / 2
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	return n
}

func (p *cutProxy) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = false
}
