package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/waitlist"
	"github.com/jackc/pgx/v5"
)

// A hotel's waitlists (docs/adr/0013-waitlist.md): one per room type, a row
// of waitlist_queues that numbers the waiters and orders every change of
// the line, and the entries of waitlist_entries. In the hotel lock order
// (docs/adr/0003-lock-order.md) the queue row comes after the idempotency
// key and before the nights; entries come after the guest's row. A join and
// a leave lock the queue row, so an offer — which locks it first — sees a
// line nobody changes under it.

// lockQueueSQL numbers a join: it creates the waitlist's row or counts one
// more waiter on it, and returns the number, under the row's lock.
const joinQueueSQL = `
INSERT INTO waitlist_queues AS q (hotel_id, room_type_id, home_region, last_seq) VALUES ($1, $2, $3, 1)
ON CONFLICT (hotel_id, room_type_id) DO UPDATE SET last_seq = q.last_seq + 1
RETURNING q.last_seq`

// lockQueueSQL locks a waitlist's row (a leave, an offer); no row means the
// room type never had a waitlist.
const lockQueueSQL = `SELECT last_seq FROM waitlist_queues WHERE hotel_id = $1 AND room_type_id = $2 FOR UPDATE`

const entryColumns = `e.entry_id::TEXT, e.hotel_id::TEXT, e.room_type_id::TEXT, e.guest_id, e.check_in, e.check_out, e.quantity,
	e.seq, e.status, COALESCE(e.reservation_id::TEXT, ''), e.offered_at, COALESCE(e.contact_email, ''), COALESCE(e.contact_phone, ''),
	e.version, e.created_at, e.updated_at, r.hold_expires_at, COALESCE(r.status, ''), COALESCE(e.contact_push_token, '')`

// entryFrom is the FROM clause of entryColumns: the entry with its offer's
// reservation.
const entryFrom = ` FROM waitlist_entries e
	LEFT JOIN reservations r ON r.hotel_id = e.hotel_id AND r.reservation_id = e.reservation_id`

func scanEntry(row pgx.Row, extra ...any) (waitlist.Entry, error) {
	var (
		e           waitlist.Entry
		ci, co      time.Time
		qty         int32
		status      string
		offeredAt   *time.Time
		expiresAt   *time.Time
		resStatus   string
		reservation string
	)
	dest := append([]any{&e.ID, &e.HotelID, &e.RoomTypeID, &e.GuestID, &ci, &co, &qty, &e.Seq, &status, &reservation,
		&offeredAt, &e.ContactEmail, &e.ContactPhone, &e.Version, &e.CreatedAt, &e.UpdatedAt, &expiresAt, &resStatus,
		&e.ContactPushToken}, extra...)
	if err := row.Scan(dest...); err != nil {
		return e, err
	}
	e.CheckIn, e.CheckOut, e.Quantity, e.Status = reservationDate(ci), reservationDate(co), int(qty), waitlist.Status(status)
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	if reservation != "" && offeredAt != nil {
		e.Offer = &waitlist.Offer{ReservationID: reservation, OfferedAt: offeredAt.UTC(), ReservationStatus: reservationStatus(resStatus)}
		if expiresAt != nil {
			e.Offer.ExpiresAt = expiresAt.UTC()
		}
	}
	return e, nil
}

func reservationDate(t time.Time) reservation.Date  { return reservation.DateOf(t) }
func reservationStatus(s string) reservation.Status { return reservation.Status(s) }
func entryEvent(typ string, e waitlist.Entry, data any) event {
	if data == nil {
		data = e
	}
	return event{kind: berth.KindHotel, partitionID: e.HotelID, typ: typ, aggregateID: e.ID, version: e.Version, data: data}
}

// The outbox events of a waiter joining and leaving (an offer's is
// waitlist.EventOffered).
const (
	eventJoined = waitlist.EventJoined
	eventLeft   = "waitlist.left"
)

// JoinWaitlist puts a guest in the line for one room of a type for a stay.
// The guest's live entries (waiting or offered) in that waitlist are
// counted under the waitlist's lock: at most waitlist.MaxWaitingPerGuest,
// and never two for the same stay (409 limit_exceeded, 409 invalid_state).
func (s *Store) JoinWaitlist(ctx context.Context, req waitlist.JoinRequest, idem *berth.Idem) (berth.Response, error) {
	return s.write(ctx, berth.KindHotel, req.HotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM room_types WHERE hotel_id = $1 AND room_type_id = $2)`,
			req.HotelID, req.RoomTypeID).Scan(&exists); err != nil {
			return nil, fmt.Errorf("read room type: %w", err)
		}
		if !exists {
			return nil, berth.Errorf(berth.CodeNotFound, "room type %s not found", req.RoomTypeID)
		}
		pre := &pgx.Batch{}
		pre.Queue(joinQueueSQL, req.HotelID, req.RoomTypeID, s.region)
		// After the lock: these see every join and leave committed before.
		pre.Queue(`SELECT count(*) FILTER (WHERE guest_id = $3 AND status IN ('waiting', 'offered')),
			count(*) FILTER (WHERE guest_id = $3 AND status IN ('waiting', 'offered') AND check_in = $4 AND check_out = $5),
			count(*) FILTER (WHERE status = 'waiting'), now()
			FROM waitlist_entries WHERE hotel_id = $1 AND room_type_id = $2`,
			req.HotelID, req.RoomTypeID, req.GuestID, req.Stay.CheckIn.Time(), req.Stay.CheckOut.Time())
		br := tx.SendBatch(ctx, pre)
		var (
			seq                    int64
			mine, same, waitingNow int64
			now                    time.Time
		)
		seqErr := br.QueryRow().Scan(&seq)
		countErr := br.QueryRow().Scan(&mine, &same, &waitingNow, &now)
		if err := errors.Join(seqErr, countErr, br.Close()); err != nil {
			return nil, fmt.Errorf("join waitlist: %w", err)
		}
		if same > 0 {
			return nil, berth.Errorf(berth.CodeInvalidState, "the guest is already on this waitlist for this stay")
		}
		if mine >= waitlist.MaxWaitingPerGuest {
			return nil, &berth.Error{Code: berth.CodeLimitExceeded,
				Detail: fmt.Sprintf("the guest already waits %d times on this waitlist, the most allowed", mine),
				Extra:  map[string]any{"limit": "waiting_per_guest", "max": waitlist.MaxWaitingPerGuest}}
		}
		now = now.UTC()
		position := waitingNow + 1
		e := waitlist.Entry{ID: req.EntryID, HotelID: req.HotelID, RoomTypeID: req.RoomTypeID, GuestID: req.GuestID,
			CheckIn: req.Stay.CheckIn, CheckOut: req.Stay.CheckOut, Quantity: 1, Status: waitlist.StatusWaiting,
			Position: &position, ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone, ContactPushToken: req.ContactPushToken, Version: 1,
			CreatedAt: now, UpdatedAt: now, Seq: seq}
		b.Queue(`INSERT INTO waitlist_entries (hotel_id, entry_id, home_region, room_type_id, guest_id, check_in, check_out,
				quantity, seq, status, contact_email, contact_phone, version, created_at, updated_at, contact_push_token)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, 'waiting', NULLIF($9, ''), NULLIF($10, ''), 1, $11, $11, NULLIF($12, ''))`,
			e.HotelID, e.ID, s.region, e.RoomTypeID, e.GuestID, e.CheckIn.Time(), e.CheckOut.Time(), e.Seq,
			e.ContactEmail, e.ContactPhone, now, e.ContactPushToken)
		return e, queueEvents(ctx, b, s.region, entryEvent(eventJoined, e, nil))
	})
}

// LeaveWaitlist takes a waiting guest out of the line. Leaving twice
// answers the entry as it is; an entry that was offered a hold already is
// 409 invalid_state (the guest cancels the offered reservation instead).
func (s *Store) LeaveWaitlist(ctx context.Context, hotelID, entryID string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error) {
	return s.write(ctx, berth.KindHotel, hotelID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		e, left, err := leaveLine(ctx, tx, hotelLine, hotelID, entryID, authorize, s.readEntry,
			func(e waitlist.Entry) waitlist.Status { return e.Status })
		if err != nil || !left {
			return e, err
		}
		return e, queueEvents(ctx, b, s.region, entryEvent(eventLeft, e, nil))
	})
}

// positionSQL is a waiting entry's place: the waiting entries of its line
// up to and including it.
const positionSQL = `(SELECT count(*) FROM waitlist_entries w WHERE w.hotel_id = e.hotel_id AND w.room_type_id = e.room_type_id
	AND w.status = 'waiting' AND w.seq <= e.seq)`

// waitlistLine names a kind of waitlist's tables for what the hotel and
// the clinic lines do alike: a line is one row of queue, keyed by the
// partition and line columns, whose entries are in entries.
type waitlistLine struct {
	entries, partition, line string
	lockSQL                  string // locks the line's queue row, as joins and offers do
	offered                  string // what an offered entry cancels instead of leaving
}

var (
	hotelLine  = waitlistLine{entries: "waitlist_entries", partition: "hotel_id", line: "room_type_id", lockSQL: lockQueueSQL, offered: "reservation"}
	clinicLine = waitlistLine{entries: "clinic_waitlist_entries", partition: "clinic_id", line: "doctor_id", lockSQL: clinicLockQueueSQL, offered: "appointment"}
)

// leaveLine takes a waiting entry out of its line, under the line's lock
// (so an offer never decides on a line changing under it), once authorize
// accepts the entry's guest. It reports whether the entry left now; an entry
// that left before is answered as it is, one offered already is 409
// invalid_state. read reads the entry as the routes answer it.
func leaveLine[E any](ctx context.Context, tx pgx.Tx, l waitlistLine, partitionID, entryID string, authorize func(guestID string) error,
	read func(ctx context.Context, q querier, partitionID, entryID string) (E, error), status func(E) waitlist.Status) (E, bool, error) {
	var (
		zero        E
		line, guest string
	)
	err := tx.QueryRow(ctx, `SELECT `+l.line+`::TEXT, guest_id FROM `+l.entries+` WHERE `+l.partition+` = $1 AND entry_id = $2`,
		partitionID, entryID).Scan(&line, &guest)
	if errors.Is(err, pgx.ErrNoRows) {
		return zero, false, berth.Errorf(berth.CodeNotFound, "waitlist entry %s not found", entryID)
	}
	if err != nil {
		return zero, false, fmt.Errorf("read waitlist entry: %w", err)
	}
	if err := authorize(guest); err != nil {
		return zero, false, err
	}
	var last int64
	if err := tx.QueryRow(ctx, l.lockSQL, partitionID, line).Scan(&last); err != nil {
		return zero, false, fmt.Errorf("lock waitlist: %w", err)
	}
	tag, err := tx.Exec(ctx, `UPDATE `+l.entries+` SET status = 'left', version = version + 1, updated_at = now()
		WHERE `+l.partition+` = $1 AND entry_id = $2 AND status = 'waiting'`, partitionID, entryID)
	if err != nil {
		return zero, false, fmt.Errorf("leave waitlist: %w", err)
	}
	e, err := read(ctx, tx, partitionID, entryID)
	if err != nil {
		return e, false, err
	}
	if tag.RowsAffected() == 0 {
		if status(e) == waitlist.StatusLeft {
			return e, false, nil // left before: the same answer
		}
		return e, false, berth.Errorf(berth.CodeInvalidState, "a %s entry cannot leave; cancel its offered %s instead", status(e), l.offered)
	}
	return e, true, nil
}

func (s *Store) readEntry(ctx context.Context, q querier, hotelID, entryID string) (waitlist.Entry, error) {
	var position int64
	e, err := scanEntry(q.QueryRow(ctx, `SELECT `+entryColumns+`, `+positionSQL+entryFrom+`
		WHERE e.hotel_id = $1 AND e.entry_id = $2`, hotelID, entryID), &position)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, berth.Errorf(berth.CodeNotFound, "waitlist entry %s not found", entryID)
	}
	if err != nil {
		return e, fmt.Errorf("read waitlist entry: %w", err)
	}
	if e.Status == waitlist.StatusWaiting {
		e.Position = &position
	}
	return e, nil
}

// GetWaitlistEntry reads an entry with its position (while it waits) and
// its offer (once offered).
func (s *Store) GetWaitlistEntry(ctx context.Context, hotelID, entryID string) (waitlist.Entry, error) {
	e, err := s.readEntry(ctx, s.db.pool, hotelID, entryID)
	return e, classify(err)
}

// ListWaitlist lists a hotel's entries by room type and place in line,
// each waiting one with its position.
func (s *Store) ListWaitlist(ctx context.Context, hotelID string, f waitlist.Filter) ([]waitlist.Entry, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 500
	}
	rows, err := s.db.pool.Query(ctx, `SELECT `+entryColumns+`, e.position FROM (
			SELECT *, sum(CASE WHEN status = 'waiting' THEN 1 ELSE 0 END) OVER (PARTITION BY room_type_id ORDER BY seq) AS position
			FROM waitlist_entries WHERE hotel_id = $1 AND ($2 = '' OR room_type_id::TEXT = $2)) AS e
		LEFT JOIN reservations r ON r.hotel_id = e.hotel_id AND r.reservation_id = e.reservation_id
		WHERE ($3 = '' OR e.guest_id = $3) AND ($4 = '' OR e.status = $4)
		ORDER BY e.room_type_id, e.seq LIMIT $5`, hotelID, f.RoomTypeID, f.GuestID, string(f.Status), f.Limit)
	if err != nil {
		return nil, classify(fmt.Errorf("list waitlist: %w", err))
	}
	defer rows.Close()
	out := []waitlist.Entry{}
	for rows.Next() {
		var position int64
		e, err := scanEntry(rows, &position)
		if err != nil {
			return nil, classify(fmt.Errorf("list waitlist: %w", err))
		}
		if e.Status == waitlist.StatusWaiting {
			e.Position = &position
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("list waitlist: %w", err))
	}
	return out, nil
}
