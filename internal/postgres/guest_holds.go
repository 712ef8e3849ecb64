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
	"github.com/jackc/pgx/v5"
)

// The per-guest hold limits of a hotel live in guest_holds, one row per
// (hotel, guest) counting the guest's held reservations and their rooms
// (schema/00030_guest_holds.sql). In the partition's lock order the row
// comes last, after the reservation row and the nights: a hold counts itself
// in the batch that records it, once its nights are taken; confirm, cancel
// and the sweeper count a hold off after giving its nights back.

// takeGuestHoldSQL counts one more hold of $4 rooms for the guest, only if
// the limits ($5 holds, $6 rooms) allow it: one conditional write, so the
// decision is made under the row lock against the latest count (READ
// COMMITTED re-evaluates the WHERE after a lock wait) and parallel holds of
// one guest can never pass the limit between a read and a write. No row
// returned means a limit refused it; a first hold inserts the row, and the
// SELECT's WHERE refuses a first hold that alone exceeds the room cap.
const takeGuestHoldSQL = `
INSERT INTO guest_holds AS g (hotel_id, guest_id, home_region, holds, rooms)
SELECT $1::UUID, $2::TEXT, $3::TEXT, 1, $4::INT4 WHERE 1 <= $5::INT4 AND $4::INT4 <= $6::INT4
ON CONFLICT (hotel_id, guest_id) DO UPDATE SET holds = g.holds + 1, rooms = g.rooms + excluded.rooms
WHERE g.holds + 1 <= $5::INT4 AND g.rooms + excluded.rooms <= $6::INT4
RETURNING g.holds`

// releaseGuestHoldSQL counts one hold of $3 rooms off the guest's row.
const releaseGuestHoldSQL = `
UPDATE guest_holds SET holds = holds - 1, rooms = rooms - $3::INT4
WHERE hotel_id = $1 AND guest_id = $2`

// limitRefusal is the answer to a hold the guest's row refused: it reads
// the row only to say which limit (the decision is made already).
func (s *Store) limitRefusal(ctx context.Context, tx pgx.Tx, req reservation.HoldRequest) error {
	var have, rooms int32
	err := tx.QueryRow(ctx, `SELECT holds, rooms FROM guest_holds WHERE hotel_id = $1 AND guest_id = $2`,
		req.HotelID, req.GuestID).Scan(&have, &rooms)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read guest holds: %w", err)
	}
	which := s.limits.Which(int(have), int(rooms), req.Quantity, true)
	if which == "" {
		// The row changed between the refusal and the read: still a refusal.
		which = berth.LimitHolds
	}
	return s.limits.LimitExceeded(which)
}

// queueReleaseGuestHold queues the count-down of a hold leaving status
// held, after its nights (if any) were given back.
func queueReleaseGuestHold(b *pgx.Batch, r reservation.Reservation) {
	b.Queue(releaseGuestHoldSQL, r.HotelID, r.GuestID, r.Quantity)
}

// releaseGuestHolds counts the given holds off their guests' rows, the
// rows locked in (hotel, guest) order so that parallel sweepers never
// deadlock on them; it runs after their nights were given back.
func releaseGuestHolds(ctx context.Context, tx pgx.Tx, holds []reservation.Reservation) error {
	type key struct{ hotel, guest string }
	rooms := map[key]int{}
	count := map[key]int{}
	for _, r := range holds {
		k := key{r.HotelID, r.GuestID}
		rooms[k] += r.Quantity
		count[k]++
	}
	keys := make([]key, 0, len(rooms))
	for k := range rooms {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.hotel, b.hotel); c != 0 {
			return c
		}
		return strings.Compare(a.guest, b.guest)
	})
	b := &pgx.Batch{}
	for _, k := range keys {
		b.Queue(`UPDATE guest_holds SET holds = holds - $3::INT4, rooms = rooms - $4::INT4
			WHERE hotel_id = $1 AND guest_id = $2`, k.hotel, k.guest, count[k], rooms[k])
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("release guest holds: %w", err)
	}
	return nil
}

// lockClinicGuestSQL locks (creating it if need be) the guest's row of a
// clinic: step 1 of the clinic lock order for a guest.
const lockClinicGuestSQL = `INSERT INTO clinic_guests (clinic_id, guest_id, home_region) VALUES ($1, $2, $3)
		ON CONFLICT (clinic_id, guest_id) DO UPDATE SET touched_at = now()`

// countClinicGuestSQL counts a guest's live appointments of a clinic: held
// and not lapsed, or confirmed and not yet over; the first count is of the
// held ones. It finds them by guestKeySQL.
const countClinicGuestSQL = `SELECT count(*) FILTER (WHERE status = 'held'), count(*) FROM appointments
		WHERE (clinic_id::TEXT || guest_id) = ($1::UUID::TEXT || $2::TEXT) AND status IN ('held', 'confirmed') AND ends_at > now()
		  AND (status = 'confirmed' OR (status = 'held' AND hold_expires_at >= now()))`

// A guest's live appointments of a clinic are found by the key of
// appointments_live_guest_idx (schema/00920): (clinic_id::TEXT || guest_id)
// with status IN ('held', 'confirmed'), which is clinic_id and guest_id
// equal (a clinic id as text has a fixed length). Written as the key, the
// condition matches that index and no other, so even a generic plan made
// while the table was nearly empty — a new deployment's first opening — uses
// it: with clinic_id = $1 AND guest_id = $2 the planner found every index
// on clinic_id as cheap on a small table and kept whichever it met first,
// which then scanned the clinic's live appointments on every hold
// (docs/PERFORMANCE.md, "A guest's count by a key of its own").

// checkClinicGuest enforces the per-guest limits of a clinic before a hold
// (isHold: the appointment will be held for prepayment; otherwise it is
// confirmed at once and counts only towards the quantity) and locks the
// guest's day rows with the doctor (step 2 of the clinic lock order,
// docs/adr/0003-lock-order.md), all in one round trip. It locks the
// guest's clinic_guests row, then counts their live appointments — held and
// not lapsed, or confirmed and not yet over — then locks the day rows
// (lockGuestDaysSQL), and, when busyOn is set, counts the guest's other
// appointments with the doctor that day that count (liveElsewhereSQL).
// Each count runs after the lock before it is granted, so under READ
// COMMITTED it sees every write committed by whoever held the lock before.
// A refusal takes nothing (the day rows are only lock rows).
//
// then (nil: none) is sent behind those statements in the same round trip
// and read after them: only what a refusal here rolls back, since a limit
// exceeded is no outcome kept with the key (the window hold's take).
func (c *ClinicStore) checkClinicGuest(ctx context.Context, tx pgx.Tx, clinicID, guestID string, isHold bool,
	doctorID string, days []time.Time, busyOn *time.Time, then *firstReads) (busy bool, err error) {
	b := &pgx.Batch{}
	b.Queue(lockClinicGuestSQL, clinicID, guestID, c.s.region)
	b.Queue(countClinicGuestSQL, clinicID, guestID)
	b.Queue(lockGuestDaysSQL, clinicID, doctorID, guestID, c.s.region, days)
	if busyOn != nil {
		b.Queue(liveElsewhereSQL, clinicID, doctorID, guestID, *busyOn, "")
	}
	if then != nil {
		then.queue(b)
	}
	br := tx.SendBatch(ctx, b)
	_, lockErr := br.Exec()
	var held, live, others int64
	countErr := br.QueryRow().Scan(&held, &live)
	_, daysErr := br.Exec()
	var busyErr, thenErr error
	if busyOn != nil {
		busyErr = br.QueryRow().Scan(&others)
	}
	if then != nil {
		thenErr = then.read(br)
	}
	closeErr := br.Close()
	if err := errors.Join(lockErr, countErr, daysErr, busyErr, closeErr); err != nil {
		return false, fmt.Errorf("count guest appointments: %w", err)
	}
	if thenErr != nil {
		return false, thenErr
	}
	l := c.s.limits
	if which := l.Which(int(held), int(live), 1, isHold); which != "" {
		return false, l.LimitExceeded(which)
	}
	return others > 0, nil
}
