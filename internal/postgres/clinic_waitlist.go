package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/waitlist"
	"github.com/jackc/pgx/v5"
)

// A clinic's waitlists (docs/adr/0015-clinic-waitlist.md): one line per
// doctor, a row of clinic_waitlist_queues that numbers the waiters and
// orders every change of the line, and the entries of
// clinic_waitlist_entries. In the clinic lock order
// (docs/adr/0003-lock-order.md) the queue row comes right after the
// idempotency key, before the patients' rows; entries come after the
// appointments. A join and a leave lock the queue row, so an offer — which
// locks it first — sees a line nobody changes under it.

const clinicJoinQueueSQL = `
INSERT INTO clinic_waitlist_queues AS q (clinic_id, doctor_id, home_region, last_seq) VALUES ($1, $2, $3, 1)
ON CONFLICT (clinic_id, doctor_id) DO UPDATE SET last_seq = q.last_seq + 1
RETURNING q.last_seq`

const clinicLockQueueSQL = `SELECT last_seq FROM clinic_waitlist_queues WHERE clinic_id = $1 AND doctor_id = $2 FOR UPDATE`

const clinicEntryColumns = `e.entry_id::TEXT, e.clinic_id::TEXT, e.doctor_id::TEXT, e.guest_id, e.local_date, e.window_start, e.window_end,
	e.by_window, e.seq, e.status, COALESCE(e.appointment_id::TEXT, ''), e.offered_at, COALESCE(e.contact_email, ''),
	COALESCE(e.contact_phone, ''), e.version, e.created_at, e.updated_at, a.hold_expires_at, COALESCE(a.status, ''),
	COALESCE(a.slot_id::TEXT, ''), a.starts_at`

const clinicEntryFrom = ` FROM clinic_waitlist_entries e
	LEFT JOIN appointments a ON a.clinic_id = e.clinic_id AND a.appointment_id = e.appointment_id`

// clinicPositionSQL is a waiting entry's place in its doctor's line.
const clinicPositionSQL = `(SELECT count(*) FROM clinic_waitlist_entries w WHERE w.clinic_id = e.clinic_id
	AND w.doctor_id = e.doctor_id AND w.status = 'waiting' AND w.seq <= e.seq)`

func scanClinicEntry(row pgx.Row, position *int64) (waitlist.ClinicEntry, error) {
	var (
		e                     waitlist.ClinicEntry
		day, from, to         time.Time
		byWindow              bool
		status, appt, aStatus string
		slotID                string
		offeredAt, expiresAt  *time.Time
		startsAt              *time.Time
	)
	if err := row.Scan(&e.ID, &e.ClinicID, &e.DoctorID, &e.GuestID, &day, &from, &to, &byWindow, &e.Seq, &status, &appt,
		&offeredAt, &e.ContactEmail, &e.ContactPhone, &e.Version, &e.CreatedAt, &e.UpdatedAt, &expiresAt, &aStatus,
		&slotID, &startsAt, position); err != nil {
		return e, err
	}
	e.Date, e.Status = appointment.DateOf(day), waitlist.Status(status)
	e.Span = waitlist.Window{From: from.UTC(), To: to.UTC()}
	if byWindow {
		w := e.Span
		e.Window = &w
	}
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	if appt != "" && offeredAt != nil {
		e.Offer = &waitlist.ClinicOffer{AppointmentID: appt, SlotID: slotID, OfferedAt: offeredAt.UTC(),
			AppointmentStatus: appointment.Status(aStatus)}
		if expiresAt != nil {
			e.Offer.ExpiresAt = expiresAt.UTC()
		}
		if startsAt != nil {
			e.Offer.StartsAt = startsAt.UTC()
		}
	}
	if e.Status == waitlist.StatusWaiting {
		p := *position
		e.Position = &p
	}
	return e, nil
}

func clinicEntryEvent(typ string, e waitlist.ClinicEntry, data any) event {
	if data == nil {
		data = e
	}
	return event{kind: berth.KindClinic, partitionID: e.ClinicID, typ: typ, aggregateID: e.ID, version: e.Version, data: data}
}

// The outbox events of a patient joining and leaving a doctor's line (an
// offer's is waitlist.EventClinicOffered).
const (
	eventClinicJoined = "clinic_waitlist.joined"
	eventClinicLeft   = "clinic_waitlist.left"
)

// daySpan is a local day of a clinic as instants: its midnight to the next.
func daySpan(d appointment.Date, loc *time.Location) waitlist.Window {
	t := d.Time()
	return waitlist.Window{
		From: time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc).UTC(),
		To:   time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc).UTC(),
	}
}

// JoinClinicWaitlist puts a patient in a doctor's line for a slot on a day
// (or in a window of it). Under the line's lock it refuses, with a 409 that
// says why: a second live entry for the same day (invalid_state,
// already_waiting), more than waitlist.MaxWaitingPerGuest live entries in
// the line (limit_exceeded, waiting_per_guest), a patient who already has an
// appointment with the doctor that day (invalid_state,
// one_per_doctor_per_day), and a window with a slot open right now
// (invalid_state, slots_open, naming them: hold one instead of waiting).
// A window outside the day, or a day that is over, is 400.
func (c *ClinicStore) JoinClinicWaitlist(ctx context.Context, req waitlist.ClinicJoinRequest, idem *berth.Idem) (berth.Response, error) {
	return c.s.write(ctx, berth.KindClinic, req.ClinicID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		var tz string
		err := tx.QueryRow(ctx, `SELECT cl.timezone FROM doctors d JOIN clinics cl ON cl.clinic_id = d.clinic_id
			WHERE d.clinic_id = $1 AND d.doctor_id = $2`, req.ClinicID, req.DoctorID).Scan(&tz)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, berth.Errorf(berth.CodeNotFound, "doctor %s not found", req.DoctorID)
		}
		if err != nil {
			return nil, fmt.Errorf("read doctor: %w", err)
		}
		loc, err := location(tz)
		if err != nil {
			return nil, fmt.Errorf("clinic %s: %w", req.ClinicID, err)
		}
		span := daySpan(req.Date, loc)
		if req.Window != nil {
			if req.Window.From.Before(span.From) || span.To.Before(req.Window.To) {
				return nil, berth.Invalid(berth.FieldError{Field: "window",
					Message: fmt.Sprintf("must lie within %s in the clinic's time zone (%s to %s)", req.Date, span.From.Format(time.RFC3339), span.To.Format(time.RFC3339))})
			}
			span = *req.Window
		}
		pre := &pgx.Batch{}
		pre.Queue(clinicJoinQueueSQL, req.ClinicID, req.DoctorID, c.s.region)
		// After the lock: these see every join and leave committed before.
		pre.Queue(`SELECT count(*) FILTER (WHERE guest_id = $3 AND status IN ('waiting', 'offered')),
			count(*) FILTER (WHERE guest_id = $3 AND status IN ('waiting', 'offered') AND local_date = $4),
			count(*) FILTER (WHERE status = 'waiting'), now()
			FROM clinic_waitlist_entries WHERE clinic_id = $1 AND doctor_id = $2`,
			req.ClinicID, req.DoctorID, req.GuestID, req.Date.Time())
		pre.Queue(liveElsewhereSQL, req.ClinicID, req.DoctorID, req.GuestID, req.Date.Time(), "")
		pre.Queue(`SELECT s.slot_id::TEXT, s.starts_at, s.ends_at, 'open' FROM slots s
			WHERE s.clinic_id = $1 AND s.doctor_id = $2 AND s.starts_at >= $3 AND s.starts_at < $4
			  AND s.starts_at > now() AND `+takeableSQL+` ORDER BY s.starts_at LIMIT 3`,
			req.ClinicID, req.DoctorID, span.From, span.To)
		br := tx.SendBatch(ctx, pre)
		var (
			seq                    int64
			mine, same, waitingNow int64
			busy                   int64
			now                    time.Time
			open                   []appointment.Slot
		)
		seqErr := br.QueryRow().Scan(&seq)
		countErr := br.QueryRow().Scan(&mine, &same, &waitingNow, &now)
		busyErr := br.QueryRow().Scan(&busy)
		rows, openErr := br.Query()
		if openErr == nil {
			open, openErr = pgx.CollectRows(rows, scanSlot)
		}
		if err := errors.Join(seqErr, countErr, busyErr, openErr, br.Close()); err != nil {
			return nil, fmt.Errorf("join clinic waitlist: %w", err)
		}
		now = now.UTC()
		switch {
		case !now.Before(span.To):
			return nil, berth.Invalid(berth.FieldError{Field: "date", Message: "the day (or window) is over"})
		case same > 0:
			return nil, &berth.Error{Code: berth.CodeInvalidState, Detail: "the patient already waits for this doctor on this day",
				Extra: map[string]any{"reason": "already_waiting"}}
		case mine >= waitlist.MaxWaitingPerGuest:
			return nil, &berth.Error{Code: berth.CodeLimitExceeded,
				Detail: fmt.Sprintf("the patient already waits %d times for this doctor, the most allowed", mine),
				Extra:  map[string]any{"limit": "waiting_per_guest", "max": waitlist.MaxWaitingPerGuest}}
		case busy > 0:
			return nil, onePerDay(req.Date.Time(), true)
		case len(open) > 0:
			for i := range open {
				open[i].DoctorID = req.DoctorID
			}
			return nil, &berth.Error{Code: berth.CodeInvalidState,
				Detail: "a slot of this doctor is open in the window now: hold it instead of waiting",
				Extra:  map[string]any{"reason": "slots_open", "alternatives": open}}
		}
		position := waitingNow + 1
		e := waitlist.ClinicEntry{ID: req.EntryID, ClinicID: req.ClinicID, DoctorID: req.DoctorID, GuestID: req.GuestID,
			Date: req.Date, Window: req.Window, Span: span, Status: waitlist.StatusWaiting, Position: &position,
			ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone, Version: 1, CreatedAt: now, UpdatedAt: now, Seq: seq}
		b.Queue(`INSERT INTO clinic_waitlist_entries (clinic_id, entry_id, home_region, doctor_id, guest_id, local_date,
				window_start, window_end, by_window, seq, status, contact_email, contact_phone, version, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'waiting', NULLIF($11, ''), NULLIF($12, ''), 1, $13, $13)`,
			e.ClinicID, e.ID, c.s.region, e.DoctorID, e.GuestID, e.Date.Time(), span.From, span.To, req.Window != nil, e.Seq,
			e.ContactEmail, e.ContactPhone, now)
		return e, queueEvents(ctx, b, c.s.region, clinicEntryEvent(eventClinicJoined, e, nil))
	})
}

// LeaveClinicWaitlist takes a waiting patient out of the line. Leaving
// twice answers the entry as it is; an offered entry is 409 invalid_state
// (the patient cancels the offered appointment instead).
func (c *ClinicStore) LeaveClinicWaitlist(ctx context.Context, clinicID, entryID string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error) {
	return c.s.write(ctx, berth.KindClinic, clinicID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		e, left, err := leaveLine(ctx, tx, clinicLine, clinicID, entryID, authorize, c.readClinicEntry,
			func(e waitlist.ClinicEntry) waitlist.Status { return e.Status })
		if err != nil || !left {
			return e, err
		}
		return e, queueEvents(ctx, b, c.s.region, clinicEntryEvent(eventClinicLeft, e, nil))
	})
}

func (c *ClinicStore) readClinicEntry(ctx context.Context, q querier, clinicID, entryID string) (waitlist.ClinicEntry, error) {
	var position int64
	e, err := scanClinicEntry(q.QueryRow(ctx, `SELECT `+clinicEntryColumns+`, `+clinicPositionSQL+clinicEntryFrom+`
		WHERE e.clinic_id = $1 AND e.entry_id = $2`, clinicID, entryID), &position)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, berth.Errorf(berth.CodeNotFound, "waitlist entry %s not found", entryID)
	}
	if err != nil {
		return e, fmt.Errorf("read waitlist entry: %w", err)
	}
	return e, nil
}

// GetClinicWaitlistEntry reads an entry with its position (while it waits)
// and its offer (once offered).
func (c *ClinicStore) GetClinicWaitlistEntry(ctx context.Context, clinicID, entryID string) (waitlist.ClinicEntry, error) {
	e, err := c.readClinicEntry(ctx, c.s.db.pool, clinicID, entryID)
	return e, classify(err)
}

// ListClinicWaitlist lists a clinic's entries by doctor and place in line,
// each waiting one with its position.
func (c *ClinicStore) ListClinicWaitlist(ctx context.Context, clinicID string, f waitlist.ClinicFilter) ([]waitlist.ClinicEntry, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 500
	}
	rows, err := c.s.db.pool.Query(ctx, `SELECT `+clinicEntryColumns+`, e.position FROM (
			SELECT *, sum(CASE WHEN status = 'waiting' THEN 1 ELSE 0 END) OVER (PARTITION BY doctor_id ORDER BY seq) AS position
			FROM clinic_waitlist_entries WHERE clinic_id = $1 AND ($2 = '' OR doctor_id::TEXT = $2)) AS e
		LEFT JOIN appointments a ON a.clinic_id = e.clinic_id AND a.appointment_id = e.appointment_id
		WHERE ($3 = '' OR e.guest_id = $3) AND ($4 = '' OR e.status = $4)
		ORDER BY e.doctor_id, e.seq LIMIT $5`, clinicID, f.DoctorID, f.GuestID, string(f.Status), f.Limit)
	if err != nil {
		return nil, classify(fmt.Errorf("list clinic waitlist: %w", err))
	}
	defer rows.Close()
	out := []waitlist.ClinicEntry{}
	for rows.Next() {
		var position int64
		e, err := scanClinicEntry(rows, &position)
		if err != nil {
			return nil, classify(fmt.Errorf("list clinic waitlist: %w", err))
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("list clinic waitlist: %w", err))
	}
	return out, nil
}

// settleClinicOfferSQL moves an offered entry on with its appointment.
const settleClinicOfferSQL = `UPDATE clinic_waitlist_entries SET status = $3, version = version + 1, updated_at = now()
	WHERE clinic_id = $1 AND entry_id = $2 AND status = 'offered'`

// queueSettleClinicOffer queues the change of a's waitlist entry when a is
// an offer whose new status settles it (waitlist.AfterClinicOffer). Entries
// come after appointments in the lock order.
func queueSettleClinicOffer(b *pgx.Batch, a appointment.Appointment) {
	if a.WaitlistEntryID == "" {
		return
	}
	if to, ok := waitlist.AfterClinicOffer(a.Status); ok {
		b.Queue(settleClinicOfferSQL, a.ClinicID, a.WaitlistEntryID, string(to))
	}
}

// settleClinicOffer is queueSettleClinicOffer run at once.
func settleClinicOffer(ctx context.Context, tx pgx.Tx, a appointment.Appointment) error {
	if a.WaitlistEntryID == "" {
		return nil
	}
	to, ok := waitlist.AfterClinicOffer(a.Status)
	if !ok {
		return nil
	}
	if _, err := tx.Exec(ctx, settleClinicOfferSQL, a.ClinicID, a.WaitlistEntryID, string(to)); err != nil {
		return fmt.Errorf("settle waitlist offer: %w", err)
	}
	return nil
}

// SetOfferTTL sets how long an offered appointment waits for its
// confirmation (the slot hold TTL until set).
func (c *ClinicStore) SetOfferTTL(d time.Duration) {
	if d > 0 {
		c.offerTTL = d
	}
}

func (c *ClinicStore) offerHoldTTL() time.Duration {
	if c.offerTTL > 0 {
		return c.offerTTL
	}
	return c.holdTTL
}

const clinicOfferCandidatesSQL = `
SELECT entry_id::TEXT, guest_id, local_date, window_start, window_end, COALESCE(contact_email, ''), COALESCE(contact_phone, ''),
       version, by_window, seq, created_at
FROM clinic_waitlist_entries
WHERE clinic_id = $1 AND doctor_id = $2 AND status = 'waiting' AND window_end > now()
ORDER BY seq LIMIT $3`

// OfferClinicFreed serves a doctor's line from the slots free now, once per
// (event, doctor) — the clinic twin of Store.OfferFreed, in one fenced
// transaction in the clinic's home region:
//
//  1. the event id claimed in clinic_waitlist_events (a redelivery or
//     replay finds it and does nothing);
//  2. the line's row locked, the first waiters read in line order;
//  3. the takeable slots in their spans read, with what each patient has
//     (live holds and appointments, the days they are busy with the
//     doctor), unlocked;
//  4. waitlist.AllocateSlots decides (first come, first served, within the
//     per-patient limits);
//  5. the chosen patients' rows, then their day rows, are locked (the
//     clinic lock order) and their counts read again: a patient whose
//     count changed since step 3 makes the transaction run again;
//  6. each offer takes its slot with the hold's own conditional write
//     (takeSlotSQL), slots ascending by id; a slot someone took since step
//     3 makes the transaction run again, deciding on what is free then;
//  7. the held appointments (waitlist_entry_id set), the entries (offered),
//     the audit rows and the events (appointment.held and
//     clinic_waitlist.offered) are written.
//
// A transaction that finds nothing to do rolls back and records nothing.
func (c *ClinicStore) OfferClinicFreed(ctx context.Context, eventID string, free waitlist.ClinicFree) ([]waitlist.ClinicEntry, error) {
	return offerOnce(ctx, c.s, berth.KindClinic, free.ClinicID, eventID, func(tx pgx.Tx, b *pgx.Batch, ids []string) ([]waitlist.ClinicEntry, error) {
		return c.offerIn(ctx, tx, b, eventID, free, ids)
	})
}

func (c *ClinicStore) offerIn(ctx context.Context, tx pgx.Tx, b *pgx.Batch, eventID string, free waitlist.ClinicFree, ids []string) ([]waitlist.ClinicEntry, error) {
	region := c.s.region
	pre := &pgx.Batch{}
	pre.Queue(`INSERT INTO clinic_waitlist_events (clinic_id, doctor_id, event_id, home_region, offers) VALUES ($1, $2, $3, $4, 0)
		ON CONFLICT (clinic_id, doctor_id, event_id) DO NOTHING`, free.ClinicID, free.DoctorID, eventID, region)
	pre.Queue(clinicLockQueueSQL, free.ClinicID, free.DoctorID)
	pre.Queue(clinicOfferCandidatesSQL, free.ClinicID, free.DoctorID, maxOfferCandidates)
	br := tx.SendBatch(ctx, pre)
	claim, claimErr := br.Exec()
	var seq int64
	queueErr := br.QueryRow().Scan(&seq)
	if errors.Is(queueErr, pgx.ErrNoRows) {
		queueErr = errNothingToOffer // the doctor never had a line
	}
	var (
		entries []waitlist.ClinicEntry
		waiters []waitlist.ClinicWaiter
	)
	rows, err := br.Query()
	if err == nil {
		for rows.Next() {
			var (
				e             waitlist.ClinicEntry
				day, from, to time.Time
				byWindow      bool
			)
			if err = rows.Scan(&e.ID, &e.GuestID, &day, &from, &to, &e.ContactEmail, &e.ContactPhone, &e.Version, &byWindow,
				&e.Seq, &e.CreatedAt); err != nil {
				break
			}
			e.ClinicID, e.DoctorID, e.Date = free.ClinicID, free.DoctorID, appointment.DateOf(day)
			e.Span = waitlist.Window{From: from.UTC(), To: to.UTC()}
			if byWindow {
				w := e.Span
				e.Window = &w
			}
			entries = append(entries, e)
			waiters = append(waiters, waitlist.ClinicWaiter{EntryID: e.ID, GuestID: e.GuestID, Day: e.Date, Span: e.Span})
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err := errors.Join(claimErr, err, br.Close()); err != nil {
		return nil, fmt.Errorf("clinic offer: claim and read the line: %w", err)
	}
	switch {
	case claim.RowsAffected() == 0:
		return nil, errNothingToOffer
	case queueErr != nil:
		if errors.Is(queueErr, errNothingToOffer) {
			return nil, queueErr
		}
		return nil, fmt.Errorf("clinic offer: lock the line: %w", queueErr)
	case len(waiters) == 0:
		return nil, errNothingToOffer
	}

	from, to := waiters[0].Span.From, waiters[0].Span.To
	guestIDs := make([]string, 0, len(waiters))
	days := map[string][]time.Time{}
	for _, w := range waiters {
		if w.Span.From.Before(from) {
			from = w.Span.From
		}
		if to.Before(w.Span.To) {
			to = w.Span.To
		}
		if _, ok := days[w.GuestID]; !ok {
			guestIDs = append(guestIDs, w.GuestID)
		}
		days[w.GuestID] = append(days[w.GuestID], w.Day.Time())
	}
	slots, doc, err := c.offerSlots(ctx, tx, free, from, to)
	if err != nil {
		return nil, err
	}
	if len(slots) == 0 {
		return nil, errNothingToOffer
	}
	patients, err := c.patientCounts(ctx, tx, free, guestIDs)
	if err != nil {
		return nil, err
	}
	d := waitlist.AllocateSlots(slots, waiters, patients, c.s.limits)
	if len(d.Offer) == 0 && len(d.Passed) == 0 {
		return nil, errNothingToOffer
	}

	// Step 5: the chosen patients' rows, sorted, then their day rows.
	var chosen []string
	for _, i := range d.Offer {
		if !slices.Contains(chosen, waiters[i].GuestID) {
			chosen = append(chosen, waiters[i].GuestID)
		}
	}
	slices.Sort(chosen)
	if len(chosen) > 0 {
		lk := &pgx.Batch{}
		lk.Queue(`INSERT INTO clinic_guests (clinic_id, guest_id, home_region) SELECT $1, g, $2 FROM unnest($3::TEXT[]) AS g ORDER BY g
			ON CONFLICT (clinic_id, guest_id) DO UPDATE SET touched_at = now()`, free.ClinicID, region, chosen)
		for _, g := range chosen {
			lk.Queue(lockGuestDaysSQL, free.ClinicID, free.DoctorID, g, region, days[g])
		}
		lbr := tx.SendBatch(ctx, lk)
		var lerr error
		for range 1 + len(chosen) {
			if _, err := lbr.Exec(); err != nil && lerr == nil {
				lerr = err
			}
		}
		if err := errors.Join(lerr, lbr.Close()); err != nil {
			return nil, fmt.Errorf("clinic offer: lock the patients: %w", err)
		}
		again, err := c.patientCounts(ctx, tx, free, chosen)
		if err != nil {
			return nil, err
		}
		for _, g := range chosen {
			if !samePatientCount(patients[g], again[g]) {
				return nil, fmt.Errorf("clinic offer: patient %s changed meanwhile: %w", g, errRetry)
			}
		}
	}

	// Step 6: the slots, ascending by id.
	type made struct {
		entry  waitlist.ClinicEntry
		slot   waitlist.FreeSlot
		apptID string
	}
	offers := make([]made, len(d.Offer))
	for n, i := range d.Offer {
		offers[n] = made{entry: entries[i], slot: slots[d.Slot[n]], apptID: ids[n]}
	}
	bySlot := slices.Clone(offers)
	slices.SortFunc(bySlot, func(a, b made) int { return strings.Compare(a.slot.ID, b.slot.ID) })
	now, err := dbNow(ctx, tx)
	if err != nil {
		return nil, err
	}
	expiresAt := now.Add(c.offerHoldTTL())
	au := &audit{clinicID: free.ClinicID, region: region}
	var evs []event
	tookBySlot := map[string]took{}
	for _, o := range bySlot {
		t, ok, err := takeSlot(ctx, tx, free.ClinicID, o.slot.ID, appointment.SlotHeld, o.entry.GuestID, o.apptID, 0, &expiresAt)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("clinic offer: slot %s was taken meanwhile: %w", o.slot.ID, errRetry)
		}
		if t.prevStatus == appointment.SlotHeld && t.prevAppt != "" {
			ev, err := expireAppointment(ctx, tx, free.ClinicID, t.prevAppt)
			if err != nil {
				return nil, err
			}
			evs = append(evs, ev...)
			au.add(o.slot.ID, t.prevAppt, systemActor, appointment.ChannelSystem, appointment.SlotHeld, appointment.SlotOpen)
		}
		tookBySlot[o.slot.ID] = t
	}

	// Step 7.
	var res []waitlist.ClinicEntry
	for _, o := range offers {
		t := tookBySlot[o.slot.ID]
		a := appointment.Appointment{ID: o.apptID, ClinicID: free.ClinicID, DoctorID: t.doctorID, SlotID: o.slot.ID,
			GuestID: o.entry.GuestID, StartsAt: t.startsAt, EndsAt: t.endsAt, LocalDate: appointment.DateOf(t.localDate),
			Status: appointment.StatusHeld, HoldExpiresAt: t.holdExpiresAt, Channel: appointment.ChannelWeb,
			CreatedBy: systemActor, ContactEmail: o.entry.ContactEmail, ContactPhone: o.entry.ContactPhone,
			WaitlistEntryID: o.entry.ID, Version: 1, CreatedAt: t.now, UpdatedAt: t.now}
		// The offer is made by the service (created_by berth/system) and
		// answered online, so its channel is web (appointments take a
		// client's channel: app, web or counter).
		// An offer is held for the patient to confirm: a doctor's price when
		// they want prepayment, 0 otherwise (confirmed without a payment).
		var zero int64
		a.PriceCents, a.Currency = &zero, doc.currency
		if doc.prepay && doc.price.cents != nil {
			a.PriceCents, a.Currency = doc.price.cents, doc.price.currency
		}
		b.Queue(`INSERT INTO appointments (clinic_id, appointment_id, home_region, doctor_id, slot_id, guest_id, starts_at,
				ends_at, local_date, status, channel, created_by_subject, created_by_role, hold_expires_at, version, created_at, updated_at,
				price_cents, currency, contact_email, contact_phone, waitlist_entry_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'held', $10, $11, $12, $13, 1, $14, $14, $15, NULLIF($16, ''), NULLIF($17, ''),
				NULLIF($18, ''), $19)`,
			a.ClinicID, a.ID, region, a.DoctorID, a.SlotID, a.GuestID, a.StartsAt, a.EndsAt, t.localDate,
			string(a.Channel), a.CreatedBy.Subject, a.CreatedBy.Role, a.HoldExpiresAt, a.CreatedAt,
			a.PriceCents, a.Currency, a.ContactEmail, a.ContactPhone, a.WaitlistEntryID)
		b.Queue(`UPDATE clinic_waitlist_entries SET status = 'offered', appointment_id = $3, offered_at = $4, offered_starts = $5,
				version = version + 1, updated_at = $4
			WHERE clinic_id = $1 AND entry_id = $2 AND status = 'waiting'`, free.ClinicID, o.entry.ID, a.ID, now, a.StartsAt)
		au.add(a.SlotID, a.ID, systemActor, appointment.ChannelSystem, appointment.SlotOpen, appointment.SlotHeld)
		e := o.entry
		e.Status, e.Version, e.UpdatedAt = waitlist.StatusOffered, e.Version+1, now
		e.Offer = &waitlist.ClinicOffer{AppointmentID: a.ID, SlotID: a.SlotID, StartsAt: a.StartsAt, OfferedAt: now,
			ExpiresAt: *a.HoldExpiresAt, AppointmentStatus: a.Status}
		evs = append(evs, appointmentEvent(appointment.EventHeld, a),
			clinicEntryEvent(waitlist.EventClinicOffered, e, map[string]any{"entry": e, "appointment": a}))
		res = append(res, e)
	}
	au.flush(b)
	if len(d.Passed) > 0 {
		passed := make([]string, len(d.Passed))
		for n, i := range d.Passed {
			passed[n] = entries[i].ID
		}
		b.Queue(`UPDATE clinic_waitlist_entries SET passed_at = $3 WHERE clinic_id = $1 AND entry_id = ANY($2::UUID[])`,
			free.ClinicID, passed, now)
	}
	b.Queue(`UPDATE clinic_waitlist_events SET offers = $4 WHERE clinic_id = $1 AND doctor_id = $2 AND event_id = $3`,
		free.ClinicID, free.DoctorID, eventID, len(offers))
	return res, queueEvents(ctx, b, region, evs...)
}

// offerDoctor is what an offer copies from the doctor.
type offerDoctor struct {
	prepay   bool
	price    doctorPrice
	currency string
}

// offerSlots reads the doctor and the takeable slots starting in
// [from, to), ascending (not locked: step 6 takes each conditionally).
func (c *ClinicStore) offerSlots(ctx context.Context, tx pgx.Tx, free waitlist.ClinicFree, from, to time.Time) ([]waitlist.FreeSlot, offerDoctor, error) {
	var doc offerDoctor
	b := &pgx.Batch{}
	b.Queue(`SELECT prepay_required, price_cents, COALESCE(currency, '') FROM doctors WHERE clinic_id = $1 AND doctor_id = $2`,
		free.ClinicID, free.DoctorID)
	b.Queue(`SELECT s.slot_id::TEXT, s.starts_at, s.local_date FROM slots s
		WHERE s.clinic_id = $1 AND s.doctor_id = $2 AND s.starts_at >= $3 AND s.starts_at < $4 AND s.starts_at > now()
		  AND `+takeableSQL+` ORDER BY s.starts_at LIMIT 1000`, free.ClinicID, free.DoctorID, from, to)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if err := br.QueryRow().Scan(&doc.prepay, &doc.price.cents, &doc.price.currency); err != nil {
		return nil, doc, fmt.Errorf("clinic offer: read doctor: %w", err)
	}
	doc.currency = doc.price.currency
	rows, err := br.Query()
	if err != nil {
		return nil, doc, fmt.Errorf("clinic offer: read free slots: %w", err)
	}
	slots, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (waitlist.FreeSlot, error) {
		var (
			s   waitlist.FreeSlot
			day time.Time
		)
		err := row.Scan(&s.ID, &s.StartsAt, &day)
		s.StartsAt, s.Day = s.StartsAt.UTC(), appointment.DateOf(day)
		return s, err
	})
	if err != nil {
		return nil, doc, fmt.Errorf("clinic offer: read free slots: %w", err)
	}
	return slots, doc, br.Close()
}

// patientCounts reads what each patient has in the clinic, as
// checkClinicGuest counts it: live holds and live appointments, and the
// days they have a counting appointment with the doctor.
func (c *ClinicStore) patientCounts(ctx context.Context, tx pgx.Tx, free waitlist.ClinicFree, guestIDs []string) (map[string]waitlist.PatientCount, error) {
	rows, err := tx.Query(ctx, `SELECT a.guest_id, count(*) FILTER (WHERE a.status = 'held'), count(*),
			COALESCE(array_agg(a.local_date::TEXT) FILTER (WHERE a.doctor_id = $3), '{}')
		FROM appointments a
		WHERE a.clinic_id = $1 AND a.guest_id = ANY($2::TEXT[]) AND a.ends_at > now() AND `+countsSQL+`
		GROUP BY a.guest_id`, free.ClinicID, guestIDs, free.DoctorID)
	if err != nil {
		return nil, fmt.Errorf("clinic offer: count patients: %w", err)
	}
	out := map[string]waitlist.PatientCount{}
	for rows.Next() {
		var (
			g          string
			held, live int64
			doctorDays []string
		)
		if err := rows.Scan(&g, &held, &live, &doctorDays); err != nil {
			rows.Close()
			return nil, fmt.Errorf("clinic offer: count patients: %w", err)
		}
		pc := waitlist.PatientCount{Held: int(held), Live: int(live), Busy: map[string]bool{}}
		for _, d := range doctorDays {
			pc.Busy[d] = true
		}
		out[g] = pc
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clinic offer: count patients: %w", err)
	}
	return out, nil
}

func samePatientCount(a, b waitlist.PatientCount) bool {
	if a.Held != b.Held || a.Live != b.Live || len(a.Busy) != len(b.Busy) {
		return false
	}
	for d := range a.Busy {
		if !b.Busy[d] {
			return false
		}
	}
	return true
}

// ExpireClinicOffers expires, in this region's clinics, held appointments
// whose hold lapsed and whose slot somebody waits for: the lapsed offers
// (so an unconfirmed offer passes to the next waiter) and the lapsed holds
// of a slot that lies in a waiting entry's span. Each is one fenced
// transaction of its own (the slot reopens, the appointment is expired, an
// offer's entry lapses, appointment.expired wakes the line). A lapsed hold
// nobody waits for is left as it is: it stays confirmable until someone
// takes its slot, as before. It returns how many it expired.
func (c *ClinicStore) ExpireClinicOffers(ctx context.Context, limit int) (int, error) {
	rows, err := c.s.db.pool.Query(ctx, `
		(SELECT a.clinic_id::TEXT, a.appointment_id::TEXT, a.slot_id::TEXT FROM appointments a
		 WHERE a.waitlist_entry_id IS NOT NULL AND a.status = 'held' AND a.hold_expires_at < now() AND a.home_region = $1
		 ORDER BY a.hold_expires_at LIMIT $2)
		UNION
		(SELECT a.clinic_id::TEXT, a.appointment_id::TEXT, a.slot_id::TEXT FROM clinic_waitlist_entries e
		 JOIN appointments a ON a.clinic_id = e.clinic_id AND a.doctor_id = e.doctor_id AND a.local_date = e.local_date
		 WHERE e.status = 'waiting' AND e.home_region = $1 AND a.status = 'held' AND a.hold_expires_at < now()
		   AND a.starts_at >= e.window_start AND a.starts_at < e.window_end AND a.starts_at > now()
		 LIMIT $2)`, c.s.region, limit)
	if err != nil {
		return 0, fmt.Errorf("find lapsed offers: %w", err)
	}
	type lapsed struct{ clinic, appt, slot string }
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lapsed, error) {
		var l lapsed
		return l, row.Scan(&l.clinic, &l.appt, &l.slot)
	})
	if err != nil {
		return 0, fmt.Errorf("find lapsed offers: %w", err)
	}
	n := 0
	var errs []error
	for _, l := range found {
		ok, err := c.expireLapsed(ctx, l.clinic, l.appt, l.slot)
		switch berth.ErrorCode(err) {
		case berth.CodeMisdirected, berth.CodeNotFound:
			continue // moved to another region meanwhile: that region's job
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// expireLapsed expires one held appointment whose hold lapsed, if it still
// holds its slot.
func (c *ClinicStore) expireLapsed(ctx context.Context, clinicID, apptID, slotID string) (bool, error) {
	expired := false
	_, err := c.s.write(ctx, berth.KindClinic, clinicID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		expired = false
		l, a, err := lockSlotAndAppointment(ctx, tx, clinicID, apptID, slotID)
		if err != nil {
			return nil, err
		}
		if a.Status != appointment.StatusHeld || !l.lapsed || l.appointmentID != a.ID {
			return nil, nil // confirmed, cancelled or taken over meanwhile
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		queueReleaseSlot(b, clinicID, a.SlotID, a.ID)
		au := &audit{clinicID: clinicID, region: c.s.region}
		au.add(a.SlotID, a.ID, systemActor, appointment.ChannelSystem, appointment.SlotHeld, appointment.SlotOpen)
		a.Status, a.Version, a.UpdatedAt = appointment.StatusExpired, a.Version+1, now
		queueAppointmentUpdate(b, a, a.LocalDate.Time())
		au.flush(b)
		queueSettleClinicOffer(b, a)
		expired = true
		return nil, queueEvents(ctx, b, c.s.region, appointmentEvent(appointment.EventExpired, a))
	})
	return expired, err
}
