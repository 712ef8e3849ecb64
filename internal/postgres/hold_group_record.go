package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// recordGroupSQL records what every hold of a group took, in one statement:
// each hold's reservation, its reservation.held event and, for a hold with
// a key, the key with its answer — the rows recordHeldSQL and
// recordHeldAnsweredSQL write for a hold alone, one row per hold in each
// table, its values from the arrays (one element per hold; the keys' arrays
// hold only the holds that have one). One Bind/Execute and one executor run
// in the server for the group instead of one per hold (ADR 0033,
// "2026-12-06"). As in recordHeldAnsweredSQL every sub-statement runs to
// completion and a failure of any fails the whole statement, so the COMMIT
// queued behind it does not run: a key claimed already fails it with a
// unique violation of idempotency_keys_pkey, a key held by a duplicate in
// flight makes it wait (lock_timeout). The reservation and event rows have
// fresh ids and never wait. A group holds one room type per hotel, so no
// two of its keys share a row and its events never tie on a partition's
// (created_at, seq).
const recordGroupSQL = `WITH r AS (
INSERT INTO reservations (hotel_id, reservation_id, home_region, room_type_id, guest_id, check_in, check_out, quantity, status,
		hold_expires_at, total_price_cents, currency, contact_email, contact_phone, version, created_at, updated_at, contact_push_token)
SELECT r.hotel, r.id, $1::TEXT, r.room_type, r.guest, r.check_in, r.check_out, r.qty, 'held', r.expires, r.price, r.currency,
       NULLIF(r.email, ''), NULLIF(r.phone, ''), 1, r.created, r.created, NULLIF(r.push, '')
FROM unnest($2::TEXT[]::UUID[], $3::TEXT[]::UUID[], $4::TEXT[]::UUID[], $5::TEXT[], $6::DATE[], $7::DATE[], $8::INT4[], $9::TIMESTAMPTZ[], $10::INT8[],
            $11::TEXT[], $12::TEXT[], $13::TEXT[], $14::TEXT[], $15::TIMESTAMPTZ[])
     AS r(hotel, id, room_type, guest, check_in, check_out, qty, expires, price, currency, email, phone, push, created)
), e AS (
INSERT INTO outbox (partition_id, event_id, home_region, kind, event_type, aggregate_id, aggregate_version, seq, payload, trace_context)
SELECT e.hotel, e.id, $1::TEXT, $16::TEXT, $17::TEXT, e.aggregate, e.version, 0, e.payload::JSON, e.trace
FROM unnest($2::TEXT[]::UUID[], $18::TEXT[]::UUID[], $3::TEXT[]::UUID[], $19::INT8[], $20::TEXT[], $21::TEXT[]) AS e(hotel, id, aggregate, version, payload, trace)
)
INSERT INTO idempotency_keys (partition_id, idem_key, home_region, request_hash, response_status, response_body)
SELECT k.hotel, k.key, $1::TEXT, k.hash, k.status, k.body
FROM unnest($22::TEXT[]::UUID[], $23::TEXT[], $24::TEXT[], $25::INT4[], $26::BYTEA[]) AS k(hotel, key, hash, status, body)`

// claimedKeysSQL lists which of the given (hotel, key) pairs are claimed:
// after a group's record failed on a key, the holds whose key a replay or
// a duplicate holds now.
const claimedKeysSQL = `SELECT k.partition_id::TEXT, k.idem_key FROM idempotency_keys AS k
JOIN unnest($1::TEXT[]::UUID[], $2::TEXT[]) AS w(hotel, key) ON k.partition_id = w.hotel AND k.idem_key = w.key`

// groupRecord gathers recordGroupSQL's arrays, a hold at a time.
type groupRecord struct {
	res struct {
		hotels, ids, roomTypes, guests, currencies, emails, phones, pushes []string
		ins, outs, expires, created                                        []time.Time
		qtys                                                               []int32
		prices                                                             []int64
	}
	ev struct {
		ids, payloads []string
		versions      []int64
		traces        []*string
	}
	keys struct {
		hotels, keys, hashes []string
		statuses             []int32
		bodies               [][]byte
	}
}

// add adds a hold's reservation r, its event e and, with a key, the key
// with its answer resp (heldRecord). ctx carries the request's trace.
func (g *groupRecord) add(ctx context.Context, r reservation.Reservation, e event, idem *berth.Idem, resp berth.Response) error {
	payload, err := eventPayload(e)
	if err != nil {
		return err
	}
	if idem != nil {
		g.keys.hotels, g.keys.keys, g.keys.hashes = append(g.keys.hotels, r.HotelID), append(g.keys.keys, idem.Key), append(g.keys.hashes, idem.Hash)
		g.keys.statuses, g.keys.bodies = append(g.keys.statuses, int32(resp.Status)), append(g.keys.bodies, resp.Body)
	}
	res := &g.res
	res.hotels, res.ids, res.roomTypes, res.guests = append(res.hotels, r.HotelID), append(res.ids, r.ID), append(res.roomTypes, r.RoomTypeID),
		append(res.guests, r.GuestID)
	res.ins, res.outs, res.qtys = append(res.ins, r.CheckIn.Time()), append(res.outs, r.CheckOut.Time()), append(res.qtys, int32(r.Quantity))
	res.expires, res.prices, res.currencies = append(res.expires, r.HoldExpiresAt), append(res.prices, r.TotalPriceCents), append(res.currencies, r.Currency)
	res.emails, res.phones, res.pushes = append(res.emails, r.ContactEmail), append(res.phones, r.ContactPhone), append(res.pushes, r.ContactPushToken)
	res.created = append(res.created, r.CreatedAt)
	g.ev.ids, g.ev.payloads = append(g.ev.ids, newEventID()), append(g.ev.payloads, string(payload))
	g.ev.versions, g.ev.traces = append(g.ev.versions, e.version), append(g.ev.traces, traceContext(ctx))
	return nil
}

// queue queues recordGroupSQL for the holds added, written in region: each
// a hotel's reservation.held event, as a hold alone writes it.
func (g *groupRecord) queue(b *pgx.Batch, region string) {
	res := &g.res
	b.Queue(recordGroupSQL, region,
		res.hotels, res.ids, res.roomTypes, res.guests, res.ins, res.outs, res.qtys, res.expires, res.prices, res.currencies,
		res.emails, res.phones, res.pushes, res.created,
		string(berth.KindHotel), reservation.EventHeld, g.ev.ids, g.ev.versions, g.ev.payloads, g.ev.traces,
		g.keys.hotels, g.keys.keys, g.keys.hashes, g.keys.statuses, g.keys.bodies)
}

// errGroupKey: a group's record failed on a key (claimed already, or held
// by a duplicate in flight past lock_timeout); nothing committed. Which
// holds must go alone is found after the rollback (groupKeyHolds).
type errGroupKey struct {
	keyed []*holdCall // the group's holds with a key
	err   error
}

func (e *errGroupKey) Error() string { return fmt.Sprintf("record group: a key: %v", e.err) }
func (e *errGroupKey) Unwrap() error { return e.err }

// groupKeyHolds are the holds of a group whose record failed on a key that
// must go alone: those whose key is claimed now (each replays, or finds
// its request changed). When none is — the key's holder rolled back, or is
// still in flight — every keyed hold goes alone, where each claims its key
// as a hold alone does (a duplicate in flight answers 409
// idempotency_in_progress). A failed read sends every keyed hold alone too.
func (s *Store) groupKeyHolds(ctx context.Context, keyed []*holdCall) []*holdCall {
	hotels, keys := make([]string, len(keyed)), make([]string, len(keyed))
	for i, c := range keyed {
		hotels[i], keys[i] = c.req.HotelID, c.idem.Key
	}
	rows, err := s.db.pool.Query(ctx, claimedKeysSQL, hotels, keys)
	if err != nil {
		return keyed
	}
	claimed := map[[2]string]bool{}
	for rows.Next() {
		var hotel, key string
		if err := rows.Scan(&hotel, &key); err != nil {
			rows.Close()
			return keyed
		}
		claimed[[2]string{hotel, key}] = true
	}
	if rows.Err() != nil {
		return keyed
	}
	var alone []*holdCall
	for i, c := range keyed {
		if claimed[[2]string{hotels[i], keys[i]}] {
			alone = append(alone, c)
		}
	}
	if len(alone) == 0 {
		return keyed
	}
	return alone
}
