package txcost

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/loadtest/internal/seed"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The store's hold SQL replayed by pgbench: postgres.HoldScript's statements
// run by the same C client as the minimal transaction's pgbench leg, so the
// two differ by their SQL only and not by the client's CPU (the Go driver
// spends about twice pgbench's per transaction, on a machine where client
// and server share the cores). It is the measure issue 17's aim was first
// stated in.
//
// pgbench cannot do what the store does between its two round trips: \aset
// would keep the take's last row, but the take returns a column named
// "?column?" (what is left of the night), which no pgbench variable may be
// named, and neither \aset nor \gset works inside a pipeline. So the replay
// runs unpipelined, one statement per round trip, and the values the store
// computes come from elsewhere:
//
//   - per transaction, from one preliminary statement inside the
//     transaction (replayPerTx, read with \gset): the stay, fresh ids, a
//     guest of its own, and the take's now() — the transaction's start,
//     the same instant inside the transaction — with the hold's TTL added;
//     the price and currency from the tool's copy of the room types;
//   - constant, from one real hold the store's code ran (HoldScript through
//     DB.RunScript, which binds the second trip with the store's bindHeld):
//     the event payload and the stored answer have that hold's bytes, so
//     their size and shape are real; their ids are that hold's.
//
// It is conservative against the store: five round trips (BEGIN, the
// preliminary, the take, the record, COMMIT) where the store sends two, and
// one statement more. It differs in one value: the store writes a NULL trace
// context when the request has no span (as in the tool's other legs), and
// pgbench has no NULL variable, so the replay writes '' — the nearest value.

// replayNote is printed with the leg's results.
const replayNote = "the store's statements replayed unpipelined, 5 round trips (BEGIN, a preliminary SELECT of the per-transaction values, " +
	"the take, the record, COMMIT) where the store sends 2 — conservative against the store; event payload and stored answer are one real " +
	"hold's bytes; "

// replayPerTx are the hold's arguments that differ per transaction, as the
// preliminary statement computes them (p is the picked room type in
// replay.pick; :i, :d, :g and the -D constants are pgbench variables).
var replayPerTx = []struct{ name, expr string }{
	{"hotel_id", "p.hotel_id"},
	{"room_type_id", "p.room_type_id"},
	{"check_in", ":first::date + :d::int"},
	{"check_out", ":first::date + :d::int + :nights::int"},
	// Every hold is a guest of its own, as in the other legs.
	{"guest_id", "'txcost-' || lpad(to_hex(:g::int8), 16, '0')"},
	{"reservation_id", "gen_random_uuid()"},
	{"event_id", "gen_random_uuid()"},
	{"idem_key", "gen_random_uuid()::text"},
	// The take's now() is the transaction's start: the same instant here.
	{"created_at", "now()"},
	{"hold_expires_at", "now() + :ttl::interval"},
	{"total_price_cents", "p.price_cents * :quantity::int8 * :nights::int8"},
	{"currency", "p.currency"},
}

// replayPickSchema maps an integer (hotel × room types + room type, the
// index the other legs pick) to the room type, with its price.
var replayPickSchema = []string{
	`CREATE SCHEMA IF NOT EXISTS replay`,
	`CREATE TABLE IF NOT EXISTS replay.pick (i INT PRIMARY KEY, hotel_id UUID NOT NULL, room_type_id UUID NOT NULL,
	   price_cents BIGINT NOT NULL, currency TEXT NOT NULL)`,
}

// holdReplay is the store's hold as a pgbench script, with the rows it is
// expected to write checked against what it wrote.
type holdReplay struct {
	script string
	defs   []string // pgbench -D name=value
	note   string
	rooms  int64 // rooms a hold reserves over its nights: the sample's quantity × nights
	before writes
}

// newHoldReplay renders the replay of the hold for the shape (hot: always
// hotel 0's first room type from the 10th night, as the other legs), after
// running sample — a hold — through the store's script for its constants.
func newHoldReplay(ctx context.Context, db *postgres.DB, raw *pgxpool.Pool, o Options, hotels []seed.Hotel, first time.Time, hot bool,
	sample reservation.HoldRequest) (*holdReplay, error) {
	if err := fillPick(ctx, raw, hotels); err != nil {
		return nil, err
	}
	sc, v := postgres.HoldScript(sample, region, holdTTL, uuid.NewString(), "txcost")
	if err := db.RunScript(ctx, sc, v); err != nil {
		return nil, fmt.Errorf("the sample hold: %w", err)
	}
	oids, err := paramTypes(ctx, raw, sc)
	if err != nil {
		return nil, err
	}
	args := scriptArgs(sc)
	bound := map[string]bool{}
	var cols []string
	for _, p := range replayPerTx {
		if !slices.Contains(args, p.name) {
			return nil, fmt.Errorf("replay: %q is no argument of the hold's statements", p.name)
		}
		bound[p.name] = true
		cols = append(cols, p.expr+" AS "+p.name)
	}
	rp := &holdReplay{rooms: int64(sample.Quantity * sample.Stay.Nights()), note: replayNote}
	// Every other argument is the sample's, encoded as the text pgx would
	// send for the parameter's type (bytea as \x…, JSON as is); Encode
	// answers NULL with a nil slice, so an empty value has a buffer to
	// append to.
	tm := pgtype.NewMap()
	for _, name := range args {
		if bound[name] {
			continue
		}
		b, err := tm.Encode(oids[name], pgtype.TextFormatCode, v[name], make([]byte, 0, 64))
		if err != nil {
			return nil, fmt.Errorf("replay: encode %s (%T): %w", name, v[name], err)
		}
		switch {
		case b == nil:
			// pgbench has no NULL variable; '' is the nearest value.
			rp.note += name + " '' where the store writes NULL; "
			cols = append(cols, "'' AS "+name)
		case len(b) == 0:
			// -D takes no empty value: the contacts the store passes as ''
			// (and writes as NULL, NULLIF($13, '')).
			cols = append(cols, "'' AS "+name)
		default:
			rp.defs = append(rp.defs, name+"="+string(b))
		}
		bound[name] = true
	}
	rp.note = strings.TrimSuffix(rp.note, "; ")
	rp.defs = append(rp.defs, "first="+first.Format(time.DateOnly),
		fmt.Sprintf("ttl=%d microseconds", holdTTL.Microseconds()))

	header := fmt.Sprintf("\\set i random(0, %d)\n\\set d random(0, %d)\n", len(hotels)*o.RoomTypes-1, o.Nights-o.Stay-1)
	if hot {
		header = "\\set i 0\n\\set d 10\n"
	}
	header += "\\set g random(0, 9223372036854775806)\n"
	prelude := "SELECT " + strings.Join(cols, ", ") + " FROM replay.pick p WHERE p.i = :i\n\\gset\n"
	if rp.script, err = pgbenchScript(sc, header, prelude, bound); err != nil {
		return nil, err
	}
	if rp.before, err = countWrites(ctx, raw); err != nil {
		return nil, err
	}
	return rp, nil
}

// fillPick writes replay.pick for the catalog (once).
func fillPick(ctx context.Context, raw *pgxpool.Pool, hotels []seed.Hotel) error {
	for _, q := range replayPickSchema {
		if _, err := raw.Exec(ctx, q); err != nil {
			return fmt.Errorf("replay.pick: %w", err)
		}
	}
	var hs, ts []string
	for _, h := range hotels {
		for _, t := range h.RoomTypes {
			hs, ts = append(hs, h.ID), append(ts, t)
		}
	}
	if _, err := raw.Exec(ctx, `INSERT INTO replay.pick (i, hotel_id, room_type_id, price_cents, currency)
		SELECT k.n - 1, rt.hotel_id, rt.room_type_id, rt.price_cents, rt.currency
		FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS k(h, t, n)
		JOIN room_types rt ON rt.hotel_id = k.h AND rt.room_type_id = k.t
		ON CONFLICT (i) DO NOTHING`, hs, ts); err != nil {
		return fmt.Errorf("replay.pick: %w", err)
	}
	if _, err := raw.Exec(ctx, `ANALYZE replay.pick`); err != nil {
		return fmt.Errorf("replay.pick: %w", err)
	}
	return nil
}

// scriptArgs are the names of sc's arguments, in order of first use.
func scriptArgs(sc postgres.Script) []string {
	var names []string
	for _, t := range sc.Trips {
		for _, s := range t.Steps {
			for _, a := range s.Args {
				if !slices.Contains(names, a) {
					names = append(names, a)
				}
			}
		}
	}
	return names
}

// paramTypes are the types the server infers for sc's arguments, as it
// prepares the statements for pgx and for pgbench alike.
func paramTypes(ctx context.Context, raw *pgxpool.Pool, sc postgres.Script) (map[string]uint32, error) {
	c, err := raw.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	oids := map[string]uint32{}
	for _, t := range sc.Trips {
		for _, s := range t.Steps {
			d, err := c.Conn().Prepare(ctx, "", s.SQL)
			if err != nil {
				return nil, fmt.Errorf("prepare the hold's statement: %w", err)
			}
			if len(d.ParamOIDs) != len(s.Args) {
				return nil, fmt.Errorf("a hold statement has %d parameters and %d argument names", len(d.ParamOIDs), len(s.Args))
			}
			for i, a := range s.Args {
				if _, ok := oids[a]; !ok {
					oids[a] = d.ParamOIDs[i]
				}
			}
		}
	}
	return oids, nil
}

// writes counts what holds write: reservations, events, keys, guests
// counted, and rooms reserved over every night.
type writes struct {
	Reservations, Events, Keys, Guests, Reserved int64
}

func countWrites(ctx context.Context, raw *pgxpool.Pool) (writes, error) {
	var w writes
	err := raw.QueryRow(ctx, `SELECT (SELECT count(*) FROM reservations), (SELECT count(*) FROM outbox),
		(SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM guest_holds),
		(SELECT coalesce(sum(reserved), 0) FROM room_inventory)`).Scan(&w.Reservations, &w.Events, &w.Keys, &w.Guests, &w.Reserved)
	if err != nil {
		return w, fmt.Errorf("count the holds' rows: %w", err)
	}
	return w, nil
}

// check fails unless the replay committed, for each transaction pgbench
// counted, exactly a hold's rows: a reservation, an event, a key, a new
// guest's count and every night of the stay taken.
func (rp *holdReplay) check(ctx context.Context, raw *pgxpool.Pool, row Row) error {
	after, err := countWrites(ctx, raw)
	if err != nil {
		return err
	}
	n := row.Ops
	got := writes{after.Reservations - rp.before.Reservations, after.Events - rp.before.Events, after.Keys - rp.before.Keys,
		after.Guests - rp.before.Guests, after.Reserved - rp.before.Reserved}
	if want := (writes{n, n, n, n, n * rp.rooms}); got != want {
		return fmt.Errorf("replay: %d transactions committed %+v, want %+v", n, got, want)
	}
	return nil
}
