package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/berthhq/berth/loadtest/internal/seed"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Baseline runs the same hold on spread inventory twice: as raw SQL against
// the database (the booking service's transaction, statement for
// statement), then through the HTTP API, and reports the ratios.
type Baseline struct {
	Hotels, RoomTypes, Nights int
	Mode                      string // both, sql, http
	Load                      Load
}

// takeSQL is the service's conditional take of every night (see
// internal/postgres/reservations.go), here for one night.
const takeSQL = `
WITH locked AS (
    SELECT night FROM room_inventory
    WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $3 AND night < $4
    ORDER BY night FOR UPDATE
)
UPDATE room_inventory AS i SET reserved = i.reserved + 1
FROM locked
WHERE i.hotel_id = $1 AND i.room_type_id = $2 AND i.night = locked.night AND i.reserved + 1 <= i.sell_limit
RETURNING i.night`

// sqlHold is one hold as the booking service runs it: fence, key, room
// type, conditional take, then reservation, outbox row and stored response
// in one batch; READ COMMITTED.
func sqlHold(ctx context.Context, e *Env, h seed.Hotel, rt string, in time.Time, guest string) (string, error) {
	resID, key := uuid.NewString(), uuid.NewString()
	err := pgx.BeginTxFunc(ctx, e.DB, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var home string
		if err := tx.QueryRow(ctx, `SELECT home_region FROM placements WHERE kind = 'hotel' AND partition_id = $1 FOR SHARE`, h.ID).Scan(&home); err != nil {
			return fmt.Errorf("fence: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (partition_id, idem_key, home_region, request_hash)
			VALUES ($1, $2, $3, 'baseline') ON CONFLICT DO NOTHING`, h.ID, key, home); err != nil {
			return fmt.Errorf("key: %w", err)
		}
		var price int64
		var currency string
		if err := tx.QueryRow(ctx, `SELECT price_cents, currency FROM room_types WHERE hotel_id = $1 AND room_type_id = $2`, h.ID, rt).Scan(&price, &currency); err != nil {
			return fmt.Errorf("room type: %w", err)
		}
		rows, err := tx.Query(ctx, takeSQL, h.ID, rt, in, in.AddDate(0, 0, 1))
		if err != nil {
			return fmt.Errorf("take: %w", err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("take: %w", err)
		}
		if n != 1 {
			return errSoldOut
		}
		// A complete reservation, as the service writes it: the relay and
		// every consumer read these events like any other.
		payload, _ := json.Marshal(map[string]any{"reservation_id": resID, "hotel_id": h.ID, "room_type_id": rt,
			"guest_id": guest, "check_in": in.Format("2006-01-02"), "check_out": in.AddDate(0, 0, 1).Format("2006-01-02"),
			"quantity": 1, "status": "held", "hold_expires_at": time.Now().Add(10 * time.Minute).UTC(),
			"total_price_cents": price, "currency": currency, "version": 1})
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO reservations (hotel_id, reservation_id, home_region, room_type_id, guest_id, check_in, check_out, quantity,
			status, hold_expires_at, total_price_cents, currency) VALUES ($1, $2, $3, $4, $5, $6, $7, 1, 'held', now() + INTERVAL '10 minutes', $8, $9)`,
			h.ID, resID, home, rt, guest, in, in.AddDate(0, 0, 1), price, currency)
		b.Queue(`INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type, aggregate_id, aggregate_version, payload)
			VALUES ($1, $2, $3, 'hotel', 'reservation.held', $4, 1, $5)`, h.ID, uuid.NewString(), home, resID, payload)
		b.Queue(`UPDATE idempotency_keys SET response_status = 201, response_body = $3 WHERE partition_id = $1 AND idem_key = $2`, h.ID, key, payload)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return "", err
	}
	return resID, nil
}

var errSoldOut = fmt.Errorf("sold_out")

// RunBaseline seeds spread inventory with COPY and measures both paths.
func (e *Env) RunBaseline(ctx context.Context, o Baseline) (*report.Report, error) {
	cfg := o.Load.config()
	cfg["hotels"], cfg["room_types"], cfg["nights"], cfg["mode"] = o.Hotels, o.RoomTypes, o.Nights, o.Mode
	r := e.newReport("baseline", cfg)
	if e.DB == nil {
		return nil, fmt.Errorf("baseline needs the database (--db)")
	}
	regions := []string{"us-east", "eu-west", "ap-south"}
	if e.Client != nil {
		regions = e.Client.Targets.Regions
	}
	cat, err := seed.Hotels(ctx, e.DB, seed.Options{Hotels: o.Hotels, RoomTypes: o.RoomTypes, Nights: o.Nights, Rooms: 100000,
		Regions: regions, Workers: 2, KeepIDs: true, StartDay: 7})
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	e.logf("baseline: seeded %d hotels × %d room types × %d nights (100,000 rooms each: spread, never sold out)", o.Hotels, o.RoomTypes, o.Nights)
	first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 7)
	ledger := audit.NewLedger()
	rec := engine.NewRecorder()
	var elapsed = map[string]time.Duration{}
	run := func(op string, hold func(ctx context.Context, h seed.Hotel, rt string, in time.Time, guest string) (string, string)) {
		e.logf("baseline: %s …", op)
		res := engine.Run(ctx, engine.Config{Rate: o.Load.Rate, Duration: o.Load.Duration, Workers: o.Load.Workers, Progress: progressOf(e)}, rec,
			func(ctx context.Context, s *engine.Session) {
				h := cat.Hotels[rand.IntN(len(cat.Hotels))]
				rt := h.RoomTypes[rand.IntN(len(h.RoomTypes))]
				in := first.AddDate(0, 0, rand.IntN(o.Nights))
				guest := "base-" + uuid.NewString()[:12]
				s.Measure(op, func() string {
					id, out := hold(ctx, h, rt, in, guest)
					if id != "" {
						ledger.Add(audit.Created{Kind: "hotel", PartitionID: h.ID, ID: id, Status: "held"}, guest)
					}
					return out
				})
			})
		elapsed[op] = res.Elapsed
		r.Engine = res
	}
	for _, h := range cat.Hotels {
		ledger.Touch("hotel", h.ID)
	}
	if o.Mode != "http" {
		run("hold_sql", func(ctx context.Context, h seed.Hotel, rt string, in time.Time, guest string) (string, string) {
			id, err := sqlHold(ctx, e, h, rt, in, guest)
			switch {
			case err == nil:
				return id, "ok"
			case err == errSoldOut:
				return "", "sold_out"
			default:
				return "", "sql_error"
			}
		})
	}
	if o.Mode == "both" {
		e.settle(ctx)
	}
	if o.Mode != "sql" && e.Client != nil {
		run("hold_http", func(ctx context.Context, h seed.Hotel, rt string, in time.Time, guest string) (string, string) {
			resp, err := e.Client.Do(ctx, client.Request{Region: h.Region, Method: http.MethodPost, Path: "/v1/hotels/" + h.ID + "/reservations",
				Token: e.Client.Guest(guest), IdemKey: uuid.NewString(),
				Body: holdBody(guest, rt, in.Format(time.DateOnly), in.AddDate(0, 0, 1).Format(time.DateOnly), 1)})
			var res struct {
				ID string `json:"reservation_id"`
			}
			if err == nil && resp.Status == http.StatusCreated {
				_ = resp.Decode(&res)
			}
			return res.ID, client.Outcome(resp, err)
		})
	}
	r.Ops = map[string]engine.OpStats{}
	for op, el := range elapsed {
		r.Ops[op] = rec.Ops(el)[op]
	}
	r.Timeline = rec.Timeline()
	if s, h := r.Ops["hold_sql"], r.Ops["hold_http"]; s.Count > 0 && h.Count > 0 {
		r.Figures["throughput_ratio_http_to_sql"] = h.Throughput / s.Throughput
		r.Figures["p99_ratio_http_to_sql"] = h.P99Ms / s.P99Ms
		r.Figures["p50_ratio_http_to_sql"] = h.P50Ms / s.P50Ms
	}
	e.finish(ctx, r, ledger)
	return r, nil
}

func progressOf(e *Env) ioWriter {
	if e.Quiet {
		return nil
	}
	return e.Log
}

// settle waits, between the two phases, until the events of the first one
// are relayed and consumed (bounded to a minute): otherwise the second phase
// shares the machine with the first phase's relaying, projection and
// notifications, and the ratio measures that, not the two paths.
func (e *Env) settle(ctx context.Context) {
	if e.DB == nil {
		return
	}
	start := time.Now()
	deadline := start.Add(time.Minute)
	var unsent int64
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err := e.DB.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil || unsent == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Consumers trail the relay by moments; give them those.
	time.Sleep(3 * time.Second)
	e.logf("baseline: settled after %s (%d events still unsent)", time.Since(start).Round(100*time.Millisecond), unsent)
}
