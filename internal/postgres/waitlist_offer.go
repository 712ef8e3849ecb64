package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/waitlist"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The offer transaction (docs/adr/0013-waitlist.md). The waitlist consumer
// runs it once per waking event (waitlist.WakingEvents) in the hotel's home
// region. In the hotel lock order it takes:
//
//  1. the placement row (FOR SHARE: the fence, as every write);
//  2. the event's row in waitlist_events (the claim: a redelivered or
//     replayed event finds it and does nothing; a duplicate running
//     concurrently waits for it);
//  3. the waitlist's row in waitlist_queues (joins, leaves and other offers
//     of the waitlist wait), then reads the first waiters of the line —
//     all of them, not only those whose stays overlap the freed nights: a
//     waiter ahead whose nights are free (they were when it joined) is
//     served before a later one, which is what FIFO means here;
//  4. every night those waiters need, ascending, FOR UPDATE — so what is
//     free cannot change while the decision is made, and the decision is
//     made on the latest committed state;
//  5. for each offer, its nights again with the hold's own conditional
//     update (takeStaySQL: the invariant is enforced by the same write as
//     a guest's hold), then the guests' rows (takeGuestHoldSQL, in guest
//     order: an offer is a hold and counts toward the per-guest limits),
//     the reservations, the entries and the events in one batch.
//
// Who gets an offer is waitlist.Allocate's decision, on what step 4 read.

// maxOfferCandidates bounds the waiters one event considers: the first in
// line. A waiter further back is served once those ahead are offered,
// leave, or cannot be served (the next event decides again).
const maxOfferCandidates = 200

// errNothingToOffer rolls an offer transaction back that found nothing to
// do: no waitlist, no waiter, the event applied already, or no room for
// any waiter. Nothing is recorded, so no table grows with every freeing
// event of every hotel; a later delivery of such an event decides again on
// what is free then, which can never offer a room twice (step 5's
// conditional take).
var errNothingToOffer = errors.New("nothing to offer")

const claimWaitlistEventSQL = `INSERT INTO waitlist_events (hotel_id, event_id, home_region, offers)
	VALUES ($1, $2, $3, 0) ON CONFLICT (hotel_id, event_id) DO NOTHING`

const offerCandidatesSQL = `
SELECT entry_id::TEXT, guest_id, check_in, check_out, quantity, COALESCE(contact_email, ''), COALESCE(contact_phone, ''),
       seq, version, created_at, COALESCE(contact_push_token, '')
FROM waitlist_entries
WHERE hotel_id = $1 AND room_type_id = $2 AND status = 'waiting'
  AND check_in >= CURRENT_DATE
ORDER BY seq LIMIT $3`

// lockNightsSQL locks the nights [$3, $4) of a room type homed in $5 in
// ascending order (the lock order) and reads what is left of each.
const lockNightsSQL = `
SELECT night, sell_limit - reserved FROM room_inventory
WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $3 AND night < $4 AND home_region = $5
ORDER BY night FOR UPDATE`

// insertOfferSQL records an offer's held reservation with its entry.
const insertOfferSQL = `INSERT INTO reservations (hotel_id, reservation_id, home_region, room_type_id, guest_id, check_in, check_out,
		quantity, status, hold_expires_at, total_price_cents, currency, contact_email, contact_phone, version, created_at, updated_at,
		waitlist_entry_id, contact_push_token)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'held', $9, $10, $11, NULLIF($12, ''), NULLIF($13, ''), 1, $14, $14, $15, NULLIF($16, ''))`

// offerEntrySQL marks a waiting entry offered; it must change one row (the
// waitlist's lock keeps leaves out meanwhile).
const offerEntrySQL = `UPDATE waitlist_entries SET status = 'offered', reservation_id = $3, offered_at = $4,
	version = version + 1, updated_at = $4
	WHERE hotel_id = $1 AND entry_id = $2 AND status = 'waiting'`

// SetOfferTTL sets how long an offered hold waits for its confirmation
// (the hold TTL until set). Call it while wiring.
func (s *Store) SetOfferTTL(d time.Duration) {
	if d > 0 {
		s.offerTTL = d
	}
}

// OfferFreed offers what free says came free to the first waiters of its
// waitlist, once per eventID (see the comment at the top of this file), and
// returns the entries it offered a hold, with their offers.
func (s *Store) OfferFreed(ctx context.Context, eventID string, free waitlist.Free) ([]waitlist.Entry, error) {
	if len(free.Nights) == 0 {
		return nil, nil
	}
	return offerOnce(ctx, s, berth.KindHotel, free.HotelID, eventID, func(tx pgx.Tx, b *pgx.Batch, ids []string) ([]waitlist.Entry, error) {
		return s.offerIn(ctx, tx, b, eventID, free, ids)
	})
}

// offerOnce runs offerIn, the offers one freeing event makes in a line of
// the partition, as one fenced write: ids are the new rows' ids, made
// before the transaction, which may run more than once. An event that
// offers nothing (errNothingToOffer) rolls back and records nothing.
func offerOnce[E any](ctx context.Context, s *Store, kind berth.Kind, partitionID, eventID string,
	offerIn func(tx pgx.Tx, b *pgx.Batch, ids []string) ([]E, error)) ([]E, error) {
	if _, err := uuid.Parse(eventID); err != nil {
		return nil, fmt.Errorf("offer: event id %q: %w", eventID, err)
	}
	ids := make([]string, maxOfferCandidates)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	var offered []E
	_, err := s.write(ctx, kind, partitionID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		var err error
		offered, err = offerIn(tx, b, ids)
		return nil, err
	})
	if errors.Is(err, errNothingToOffer) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return offered, nil
}

func (s *Store) offerIn(ctx context.Context, tx pgx.Tx, b *pgx.Batch, eventID string, free waitlist.Free, ids []string) ([]waitlist.Entry, error) {
	pre := &pgx.Batch{}
	pre.Queue(claimWaitlistEventSQL, free.HotelID, eventID, s.region)
	pre.Queue(lockQueueSQL, free.HotelID, free.RoomTypeID)
	pre.Queue(offerCandidatesSQL, free.HotelID, free.RoomTypeID, maxOfferCandidates)
	br := tx.SendBatch(ctx, pre)
	claim, claimErr := br.Exec()
	var seq int64
	queueErr := br.QueryRow().Scan(&seq)
	if errors.Is(queueErr, pgx.ErrNoRows) {
		queueErr = errNothingToOffer // the room type never had a waitlist
	}
	var waiters []waitlist.Waiter
	var entries []waitlist.Entry
	rows, err := br.Query()
	if err == nil {
		for rows.Next() {
			var (
				e      waitlist.Entry
				ci, co time.Time
				qty    int32
			)
			if err = rows.Scan(&e.ID, &e.GuestID, &ci, &co, &qty, &e.ContactEmail, &e.ContactPhone, &e.Seq, &e.Version, &e.CreatedAt,
				&e.ContactPushToken); err != nil {
				break
			}
			e.HotelID, e.RoomTypeID, e.CheckIn, e.CheckOut, e.Quantity = free.HotelID, free.RoomTypeID, reservation.DateOf(ci), reservation.DateOf(co), int(qty)
			entries = append(entries, e)
			waiters = append(waiters, waitlist.Waiter{EntryID: e.ID, GuestID: e.GuestID, Stay: e.Stay(), Quantity: e.Quantity})
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err := errors.Join(claimErr, err, br.Close()); err != nil {
		return nil, fmt.Errorf("offer: claim and read the line: %w", err)
	}
	switch {
	case claim.RowsAffected() == 0:
		return nil, errNothingToOffer // applied already
	case queueErr != nil:
		if errors.Is(queueErr, errNothingToOffer) {
			return nil, queueErr
		}
		return nil, fmt.Errorf("offer: lock the waitlist: %w", queueErr)
	case len(waiters) == 0:
		return nil, errNothingToOffer
	}

	// Every night the candidates need, locked, and what their guests hold.
	from, to := waiters[0].Stay.CheckIn, waiters[0].Stay.CheckOut
	guestIDs := make([]string, 0, len(waiters))
	for _, w := range waiters {
		if w.Stay.CheckIn.Before(from) {
			from = w.Stay.CheckIn
		}
		if to.Before(w.Stay.CheckOut) {
			to = w.Stay.CheckOut
		}
		guestIDs = append(guestIDs, w.GuestID)
	}
	left, guests, err := s.offerState(ctx, tx, free, from, to, guestIDs)
	if err != nil {
		return nil, err
	}
	d := waitlist.Allocate(left, waiters, guests, s.limits)
	if len(d.Offer) == 0 && len(d.Passed) == 0 {
		return nil, errNothingToOffer
	}

	var res []waitlist.Entry
	now, err := dbNow(ctx, tx)
	if err != nil {
		return nil, err
	}
	type made struct {
		entry waitlist.Entry
		r     reservation.Reservation
		t     taken
	}
	offers := make([]made, 0, len(d.Offer))
	for n, i := range d.Offer {
		e := entries[i]
		// The hold's own conditional take: under the locks of step 4 it
		// takes every night, or the decision was wrong — roll back.
		t, err := takeStay(ctx, tx, s.region, free.HotelID, free.RoomTypeID, e.Stay(), e.Quantity)
		if err != nil {
			return nil, err
		}
		if len(t.nights) != e.Stay().Nights() {
			return nil, fmt.Errorf("offer to %s: took %d of %d nights under their locks", e.ID, len(t.nights), e.Stay().Nights())
		}
		t.expiresAt = t.now.Add(s.offerTTL)
		r := heldReservation(reservation.HoldRequest{ReservationID: ids[n], HotelID: free.HotelID, RoomTypeID: free.RoomTypeID,
			GuestID: e.GuestID, Stay: e.Stay(), Quantity: e.Quantity, ContactEmail: e.ContactEmail, ContactPhone: e.ContactPhone,
			ContactPushToken: e.ContactPushToken}, t)
		r.WaitlistEntryID = e.ID
		e.Status, e.Version, e.UpdatedAt = waitlist.StatusOffered, e.Version+1, now
		e.Offer = &waitlist.Offer{ReservationID: r.ID, OfferedAt: now, ExpiresAt: r.HoldExpiresAt, ReservationStatus: r.Status}
		offers = append(offers, made{entry: e, r: r, t: t})
	}

	// The guests' rows last, in guest order (parallel sweepers and offers
	// never deadlock on them); each must take its hold.
	byGuest := slices.Clone(offers)
	slices.SortStableFunc(byGuest, func(a, b made) int { return strings.Compare(a.r.GuestID, b.r.GuestID) })
	counts := &pgx.Batch{}
	for _, o := range byGuest {
		counts.Queue(takeGuestHoldSQL, free.HotelID, o.r.GuestID, s.region, o.r.Quantity, s.limits.Holds, s.limits.Quantity)
	}
	for _, o := range offers {
		counts.Queue(offerEntrySQL, free.HotelID, o.entry.ID, o.r.ID, now)
	}
	cbr := tx.SendBatch(ctx, counts)
	for _, o := range byGuest {
		tag, err := cbr.Exec()
		if err == nil && tag.RowsAffected() != 1 {
			// A hold of the guest committed between the read of their row
			// and this write: decide again, in a new transaction.
			err = fmt.Errorf("offer to guest %s: the guest's holds changed: %w", o.r.GuestID, errRetry)
		}
		if err != nil {
			cbr.Close()
			return nil, fmt.Errorf("offer: count the guest's hold: %w", err)
		}
	}
	for _, o := range offers {
		tag, err := cbr.Exec()
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("entry %s is no longer waiting under the waitlist's lock", o.entry.ID)
		}
		if err != nil {
			cbr.Close()
			return nil, fmt.Errorf("offer: mark the entry: %w", err)
		}
	}
	if err := cbr.Close(); err != nil {
		return nil, fmt.Errorf("offer: %w", err)
	}

	for _, o := range offers {
		r := o.r
		b.Queue(insertOfferSQL, r.HotelID, r.ID, s.region, r.RoomTypeID, r.GuestID, r.CheckIn.Time(), r.CheckOut.Time(),
			r.Quantity, r.HoldExpiresAt, r.TotalPriceCents, r.Currency, r.ContactEmail, r.ContactPhone, r.CreatedAt, r.WaitlistEntryID,
			r.ContactPushToken)
		if err := queueEvents(ctx, b, s.region,
			reservationInventoryEvent(reservation.EventHeld, r, o.t.counts),
			entryEvent(waitlist.EventOffered, o.entry, map[string]any{"entry": o.entry, "reservation": r})); err != nil {
			return nil, err
		}
		res = append(res, o.entry)
	}
	if len(d.Passed) > 0 {
		passed := make([]string, len(d.Passed))
		for n, i := range d.Passed {
			passed[n] = entries[i].ID
		}
		b.Queue(`UPDATE waitlist_entries SET passed_at = $3 WHERE hotel_id = $1 AND entry_id = ANY($2::UUID[])`,
			free.HotelID, passed, now)
	}
	b.Queue(`UPDATE waitlist_events SET offers = $3 WHERE hotel_id = $1 AND event_id = $2`, free.HotelID, eventID, len(offers))
	return res, nil
}

// offerState locks the nights [from, to) of the freed room type and reads
// what is left of each, and what the candidates' guests hold, in one round
// trip (the guests' rows are read, not locked: their conditional write
// decides at the end).
func (s *Store) offerState(ctx context.Context, tx pgx.Tx, free waitlist.Free, from, to reservation.Date, guestIDs []string) (map[string]int, map[string]waitlist.GuestCount, error) {
	b := &pgx.Batch{}
	b.Queue(lockNightsSQL, free.HotelID, free.RoomTypeID, from.Time(), to.Time(), s.region)
	b.Queue(`SELECT guest_id, holds, rooms FROM guest_holds WHERE hotel_id = $1 AND guest_id = ANY($2::TEXT[])`, free.HotelID, guestIDs)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	left := map[string]int{}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("offer: lock nights: %w", err)
	}
	for rows.Next() {
		var (
			night time.Time
			n     int32
		)
		if err := rows.Scan(&night, &n); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("offer: lock nights: %w", err)
		}
		left[reservation.DateOf(night).String()] = int(n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("offer: lock nights: %w", err)
	}
	guests := map[string]waitlist.GuestCount{}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("offer: read guest holds: %w", err)
	}
	for rows.Next() {
		var (
			g            string
			holds, rooms int32
		)
		if err := rows.Scan(&g, &holds, &rooms); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("offer: read guest holds: %w", err)
		}
		guests[g] = waitlist.GuestCount{Holds: int(holds), Rooms: int(rooms)}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("offer: read guest holds: %w", err)
	}
	return left, guests, br.Close()
}

// settleOfferSQL moves an offered entry on with its reservation.
const settleOfferSQL = `UPDATE waitlist_entries SET status = $3, version = version + 1, updated_at = $4
	WHERE hotel_id = $1 AND entry_id = $2 AND status = 'offered'`

// queueSettleOffer queues the change of r's waitlist entry, when r is an
// offer whose new status settles it (waitlist.AfterOffer); it reports
// whether it queued a statement. It runs after the reservation's nights and
// guest row: entries come last in the lock order.
func queueSettleOffer(b *pgx.Batch, r reservation.Reservation) bool {
	if r.WaitlistEntryID == "" {
		return false
	}
	to, ok := waitlist.AfterOffer(r.Status)
	if !ok {
		return false
	}
	b.Queue(settleOfferSQL, r.HotelID, r.WaitlistEntryID, string(to), r.UpdatedAt)
	return true
}
