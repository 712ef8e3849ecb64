package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/jackc/pgx/v5"
)

// Every function here follows the clinic lock order of
// docs/adr/0003-lock-order.md.

const appointmentColumns = `appointment_id::TEXT, clinic_id::TEXT, doctor_id::TEXT, slot_id::TEXT, guest_id, starts_at, ends_at,
	local_date, status, hold_expires_at, channel, created_by_subject, created_by_role, COALESCE(payment_ref, ''),
	price_cents, COALESCE(currency, ''), version, created_at, updated_at, COALESCE(contact_email, ''), COALESCE(contact_phone, ''),
	COALESCE(contact_push_token, ''), COALESCE(waitlist_entry_id::TEXT, '')`

func scanAppointment(row pgx.Row) (appointment.Appointment, error) {
	var (
		a               appointment.Appointment
		day             time.Time
		status, channel string
	)
	err := row.Scan(&a.ID, &a.ClinicID, &a.DoctorID, &a.SlotID, &a.GuestID, &a.StartsAt, &a.EndsAt, &day, &status,
		&a.HoldExpiresAt, &channel, &a.CreatedBy.Subject, &a.CreatedBy.Role, &a.PaymentRef,
		&a.PriceCents, &a.Currency, &a.Version, &a.CreatedAt, &a.UpdatedAt, &a.ContactEmail, &a.ContactPhone, &a.ContactPushToken,
		&a.WaitlistEntryID)
	a.LocalDate, a.Status, a.Channel = appointment.DateOf(day), appointment.Status(status), appointment.Channel(channel)
	a.StartsAt, a.EndsAt, a.CreatedAt, a.UpdatedAt = a.StartsAt.UTC(), a.EndsAt.UTC(), a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	if a.HoldExpiresAt != nil {
		u := a.HoldExpiresAt.UTC()
		a.HoldExpiresAt = &u
	}
	return a, err
}

// GetAppointment reads an appointment.
func (c *ClinicStore) GetAppointment(ctx context.Context, clinicID, apptID string) (appointment.Appointment, error) {
	a, err := scanAppointment(c.s.db.pool.QueryRow(ctx,
		`SELECT `+appointmentColumns+` FROM appointments WHERE clinic_id = $1 AND appointment_id = $2`, clinicID, apptID))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, berth.Errorf(berth.CodeNotFound, "appointment %s not found", apptID)
	}
	return a, classify(err)
}

func appointmentEvent(typ string, a appointment.Appointment) event {
	return event{kind: berth.KindClinic, partitionID: a.ClinicID, typ: typ, aggregateID: a.ID, version: a.Version, data: a}
}

// lockGuestDaysSQL locks (creating if needed) the guest's day rows of a
// doctor, ascending by day: step 2 of the clinic lock order
// (docs/adr/0003-lock-order.md). Every write that may give the guest a new
// live appointment on one of these days holds the row, so the count that
// follows cannot be beaten by a parallel request.
const lockGuestDaysSQL = `INSERT INTO clinic_guest_days (clinic_id, doctor_id, guest_id, local_date, home_region)
	SELECT $1, $2, $3, d, $4 FROM unnest($5::DATE[]) AS d ORDER BY d
	ON CONFLICT (clinic_id, doctor_id, guest_id, local_date) DO UPDATE SET touched_at = now()`

// lockGuestDays runs lockGuestDaysSQL on its own (a hold runs it in the
// batch of checkClinicGuest).
func lockGuestDays(ctx context.Context, tx pgx.Tx, clinicID, region, doctorID, guestID string, days []time.Time) error {
	if _, err := tx.Exec(ctx, lockGuestDaysSQL, clinicID, doctorID, guestID, region, days); err != nil {
		return fmt.Errorf("lock guest days: %w", err)
	}
	return nil
}

// countsSQL is appointment.Status.Counts in database time, over an
// appointment row a: the appointments that count against the guest's one
// per doctor per day.
const countsSQL = `(a.status = 'confirmed' OR (a.status = 'held' AND a.hold_expires_at >= now()))`

// liveElsewhereSQL counts the guest's other appointments with the doctor
// on a day that count (a booking, or a hold that has not lapsed), found by
// the guest's key (countClinicGuestSQL says why).
const liveElsewhereSQL = `SELECT count(*) FROM appointments AS a
	WHERE (a.clinic_id::TEXT || a.guest_id) = ($1::UUID::TEXT || $3::TEXT) AND a.status IN ('held', 'confirmed')
	  AND a.doctor_id = $2 AND a.local_date = $4 AND a.appointment_id::TEXT <> $5
	  AND ` + countsSQL

// liveElsewhere reports whether the guest has another live appointment (a
// booking, or a hold that has not lapsed) with the doctor on that day.
func liveElsewhere(ctx context.Context, tx pgx.Tx, clinicID, doctorID, guestID string, day time.Time, exceptAppt string) (bool, error) {
	var n int64
	if err := tx.QueryRow(ctx, liveElsewhereSQL, clinicID, doctorID, guestID, day, exceptAppt).Scan(&n); err != nil {
		return false, fmt.Errorf("count guest appointments: %w", err)
	}
	return n > 0, nil
}

// onePerDay executes appointment.OnePerDoctorPerDay: its refusal is a 409
// invalid_state that says why.
func onePerDay(day time.Time, anotherCounts bool) error {
	if err := appointment.OnePerDoctorPerDay(appointment.DateOf(day), anotherCounts); err != nil {
		return &berth.Error{Code: berth.CodeInvalidState, Detail: err.Error(),
			Extra: map[string]any{"reason": "one_per_doctor_per_day"}}
	}
	return nil
}

// expireAppointment marks a held appointment whose slot someone else is
// taking (its hold lapsed) as expired, and returns its event.
func expireAppointment(ctx context.Context, tx pgx.Tx, clinicID, apptID string) ([]event, error) {
	a, err := scanAppointment(tx.QueryRow(ctx,
		`UPDATE appointments SET status = 'expired', version = version + 1, updated_at = now()
		 WHERE clinic_id = $1 AND appointment_id = $2 AND status = 'held'
		 RETURNING `+appointmentColumns, clinicID, apptID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("expire appointment: %w", err)
	}
	// A lapsed waitlist offer taken over: its entry lapses (one statement,
	// only for an offer — a plain hold pays nothing for it).
	if err := settleClinicOffer(ctx, tx, a); err != nil {
		return nil, err
	}
	return []event{appointmentEvent(appointment.EventExpired, a)}, nil
}

// Hold takes one slot for a guest: the named one, or the first open one of
// the doctor in the window (holdInWindow). When the doctor needs no
// prepayment the appointment is confirmed in the same transaction. Losing
// the slot is a committed 409 slot_taken naming alternatives.
//
// A window found full, or a named slot found taken, a moment ago is asked
// by a read first (refuseByRead): still full or taken, it is refused
// without a transaction, and nothing is stored with the key. A hold of a
// named slot another hold of which is in its transaction in this process
// waits for that one to end first (slotFlights).
func (c *ClinicStore) Hold(ctx context.Context, req appointment.HoldRequest, idem *berth.Idem) (berth.Response, error) {
	deadline := time.Now().Add(slotFlightWait)
	for {
		if resp, ok, err := c.refuseByRead(ctx, req, idem); ok {
			return resp, err
		}
		if req.ByWindow() {
			break
		}
		wait, leave := c.flights.join(fullHintKey(req))
		if wait == nil {
			defer leave()
			break
		}
		if !waitFlight(ctx, wait, deadline) {
			break // past the bound, or the request ended: its transaction decides
		}
	}
	if idem != nil && !idem.Webhook {
		// A retry of this key meanwhile must wait for this answer, not be
		// refused by a read that cannot see this transaction's claim.
		defer c.s.inFlight(req.ClinicID, idem.Key)()
	}
	var (
		first  *firstReads
		window *windowReads
		slot   *slotHint
	)
	if req.ByWindow() {
		window = &windowReads{}
		first = window.of(req)
	} else {
		slot = &slotHint{}
		first = slotFirstRead(req, slot)
	}
	// A hold of one slot takes it in the round trip of the guest's checks
	// (holdSlot); when the day rule refuses a hold whose take got the slot,
	// its transaction rolls back and the hold runs again with the take after
	// the checks (sequential), as it did before that.
	for sequential := false; ; sequential = true {
		retake := false
		resp, err := c.s.writeWith(ctx, berth.KindClinic, req.ClinicID, idem, first, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
			v, err := c.hold(ctx, tx, b, req, window, slot, sequential)
			retake = errors.Is(err, errTakenOnBusyDay)
			return v, err
		})
		if retake && !sequential {
			continue
		}
		return resp, err
	}
}

// hold is the body of Hold's transaction: take the slot (holdSlot) or a
// slot of the window (holdInWindow), then queue the new appointment, its
// audit and its events on b.
func (c *ClinicStore) hold(ctx context.Context, tx pgx.Tx, b *pgx.Batch, req appointment.HoldRequest,
	window *windowReads, slot *slotHint, sequential bool) (any, error) {
	statusOf := func(prepay bool) appointment.Status {
		if prepay {
			return appointment.StatusHeld
		}
		return appointment.StatusConfirmed
	}
	var (
		t      took
		prepay bool
		price  doctorPrice
		err    error
	)
	if req.ByWindow() {
		t, prepay, price, err = c.holdInWindow(ctx, tx, req, window, statusOf)
	} else {
		t, prepay, price, err = c.holdSlot(ctx, tx, req, *slot, statusOf, sequential)
	}
	if err != nil {
		return nil, err
	}
	slotID, status := t.slotID, statusOf(prepay)
	a := appointment.Appointment{
		ID: req.AppointmentID, ClinicID: req.ClinicID, DoctorID: t.doctorID, SlotID: slotID, GuestID: req.GuestID,
		StartsAt: t.startsAt, EndsAt: t.endsAt, LocalDate: appointment.DateOf(t.localDate), Status: status,
		HoldExpiresAt: t.holdExpiresAt, Channel: req.Channel, CreatedBy: req.Actor,
		ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone, ContactPushToken: req.ContactPushToken,
		Version: 1, CreatedAt: t.now, UpdatedAt: t.now,
	}
	if prepay {
		a.PriceCents, a.Currency = price.cents, price.currency
	}
	au := &audit{clinicID: req.ClinicID, region: c.s.region}
	var evs []event
	if t.prevStatus == appointment.SlotHeld && t.prevAppt != "" {
		// The previous holder's hold lapsed: it loses the slot now, in
		// this transaction, before the new appointment row goes in (the
		// one-live-appointment-per-slot index would refuse it otherwise).
		ev, err := expireAppointment(ctx, tx, req.ClinicID, t.prevAppt)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev...)
		au.add(slotID, t.prevAppt, systemActor, appointment.ChannelSystem, appointment.SlotHeld, appointment.SlotOpen)
	}
	b.Queue(insertAppointmentSQL,
		a.ClinicID, a.ID, c.s.region, a.DoctorID, a.SlotID, a.GuestID, a.StartsAt, a.EndsAt, t.localDate,
		string(a.Status), string(a.Channel), a.CreatedBy.Subject, a.CreatedBy.Role, a.HoldExpiresAt, a.CreatedAt,
		a.PriceCents, a.Currency, a.ContactEmail, a.ContactPhone, a.ContactPushToken)
	au.add(slotID, a.ID, req.Actor, req.Channel, appointment.SlotOpen, status.SlotStatus())
	au.flush(b)
	typ := appointment.EventHeld
	if status == appointment.StatusConfirmed {
		typ = appointment.EventConfirmed
	}
	evs = append(evs, appointmentEvent(typ, a))
	return a, queueEvents(ctx, b, c.s.region, evs...)
}

// holdSlot takes, for a hold of one slot, that slot, and says whether the
// doctor wants prepayment (statusOf turns that into the new appointment's
// status). h is the slot's hint, read in the transaction's first round
// trip (slotFirstRead).
//
// A slot taken as of that read is refused at once, without the guest's
// rows. Otherwise the take goes in the round trip of the guest's checks,
// as a window's does (checkClinicGuest's then), so a win is three round
// trips: a limit refusal rolls the take back with the rest. A refusal by
// the day rule (appointment.OnePerDoctorPerDay) is kept with the key, so
// its transaction commits: when the take got the slot, holdSlot returns
// errTakenOnBusyDay instead, the transaction rolls back, and Hold runs it
// again sequential — the take after the checks, which the day rule stops
// before it (ADR 0011, 2026-12-06).
func (c *ClinicStore) holdSlot(ctx context.Context, tx pgx.Tx, req appointment.HoldRequest, h slotHint,
	statusOf func(prepay bool) appointment.Status, sequential bool) (took, bool, doctorPrice, error) {
	prepay, price := h.prepay, h.price
	if h.taken {
		// Someone holds or booked the slot as of this read (the common
		// answer after the first instants of an opening): answered at
		// once, without queueing behind the slot's lock or taking the
		// guest's rows. A slot freed a moment later is a race this hold
		// lost at the read. The next holds of the slot ask a read first
		// (refuseTakenSlot).
		c.full.mark(req, time.Now())
		return took{}, false, price, slotTaken(ctx, tx, req.ClinicID, h.doctorID, req.SlotID, req.GuestID, h.startsAt, takenSlotDetail)
	}
	to := statusOf(prepay).SlotStatus()
	var (
		t    took
		ok   bool
		take *firstReads
	)
	if !sequential {
		take = &firstReads{
			queue: func(b *pgx.Batch) { queueTakeSlot(b, req, to, c.holdTTL) },
			read: func(br pgx.BatchResults) (err error) {
				t, ok, err = scanTakeSlot(br.QueryRow(), req.SlotID)
				return err
			},
		}
	}
	busy, err := c.checkClinicGuest(ctx, tx, req.ClinicID, req.GuestID, prepay, h.doctorID, []time.Time{h.localDate}, &h.localDate, take)
	if err != nil {
		return took{}, false, price, err
	}
	if busy && ok {
		return took{}, false, price, errTakenOnBusyDay
	}
	if err := onePerDay(h.localDate, busy); err != nil {
		return took{}, false, price, err
	}
	if sequential {
		if t, ok, err = takeSlot(ctx, tx, req.ClinicID, req.SlotID, to, req.GuestID, req.AppointmentID, c.holdTTL, nil); err != nil {
			return took{}, false, price, err
		}
	}
	if !ok {
		return took{}, false, price, c.refuseSlot(ctx, tx, req.ClinicID, req.SlotID, req.GuestID)
	}
	// Taken by this hold: the others ask a read first.
	c.full.mark(req, time.Now())
	return t, prepay, price, nil
}

// errTakenOnBusyDay rolls back a hold whose take got its slot while the
// day rule refuses it (Hold runs it again, the take after the checks).
var errTakenOnBusyDay = errors.New("slot taken on a day the guest has the doctor")

// fullWindowDetail is the detail of the refusal of a full window.
const fullWindowDetail = "no open slot of this doctor in the window"

// windowReads are the reads a hold by window makes before it locks
// anything, sent in the transaction's first round trip with the fence and
// the key claim (firstReads): the doctor, and whether the window has a
// takeable slot. The alternatives of a full window are read only when it
// is full: most window holds that reach a transaction win (the holds of a
// window found full a moment ago are refused by a read, ADR 0011), and
// reading the alternatives of every one cost more than the round trip the
// few refusals now take.
type windowReads struct {
	prepay, open bool
	price        doctorPrice
	tz           string
}

// windowDoctorSQL reads the doctor of a window hold ($1 clinic, $2
// doctor): their prepayment and price, the clinic's time zone, and whether
// the window [$3, $4) has a takeable slot.
const windowDoctorSQL = `SELECT d.prepay_required, d.price_cents, COALESCE(d.currency, ''), cl.timezone, ` + windowHasSlotSQL + `
				FROM doctors d JOIN clinics cl ON cl.clinic_id = d.clinic_id
				WHERE d.clinic_id = $1 AND d.doctor_id = $2`

// of is the firstReads that fill w for req.
func (w *windowReads) of(req appointment.HoldRequest) *firstReads {
	return &firstReads{
		queue: func(b *pgx.Batch) {
			b.Queue(windowDoctorSQL, req.ClinicID, req.DoctorID, req.WindowStart, req.WindowEnd)
		},
		read: func(br pgx.BatchResults) error {
			*w = windowReads{}
			err := br.QueryRow().Scan(&w.prepay, &w.price.cents, &w.price.currency, &w.tz, &w.open)
			if errors.Is(err, pgx.ErrNoRows) {
				return berth.Errorf(berth.CodeNotFound, "doctor %s not found", req.DoctorID)
			}
			if err != nil {
				return fmt.Errorf("read doctor and window: %w", err)
			}
			return nil
		},
	}
}

// holdInWindow takes, for a hold by window, the first open slot of the
// doctor in the window on a day the guest is free, and says whether the
// doctor wants prepayment (statusOf turns that into the new appointment's
// status). w holds the window's first reads, made in the transaction's
// first round trip (windowReads).
//
// It is the cheap path of a clinic opening. A full window — the common
// answer when a whole opening asks for the first hour — is refused on those
// reads before anything is locked or written (only the idempotency key is,
// so a replay answers the same), with the alternatives offered to this
// guest, read then (the next holds of that window are refused by a read,
// refuseFullWindow, without a transaction). Otherwise the per-guest checks and the guest's day rows come
// first (the lock order of docs/adr/0003-lock-order.md), then one
// statement picks and takes the slot (takeFirstSQL): slots other requests
// are taking right now are skipped, not waited for, so a herd on one
// doctor-day spreads over its open slots without queueing on any row.
func (c *ClinicStore) holdInWindow(ctx context.Context, tx pgx.Tx, req appointment.HoldRequest, w *windowReads,
	statusOf func(prepay bool) appointment.Status) (took, bool, doctorPrice, error) {
	prepay, price := w.prepay, w.price
	if !w.open {
		c.full.mark(req, time.Now())
		return took{}, false, price, slotTaken(ctx, tx, req.ClinicID, req.DoctorID, "", req.GuestID, req.WindowStart, fullWindowDetail)
	}
	loc, err := location(w.tz)
	if err != nil {
		return took{}, false, price, fmt.Errorf("clinic %s: %w", req.ClinicID, err)
	}
	var days []time.Time
	for _, d := range appointment.LocalDates(req.WindowStart, req.WindowEnd, loc) {
		days = append(days, d.Time())
	}
	// The take goes in the guest checks' round trip: when they refuse (a
	// limit exceeded, never kept with the key) the transaction rolls back
	// and the take with it; the guest's busy days are takeFirstSQL's own
	// rule, read after the day rows are locked.
	var (
		t  took
		ok bool
	)
	take := &firstReads{
		queue: func(b *pgx.Batch) { queueTakeFirst(b, req, statusOf(prepay).SlotStatus(), c.holdTTL) },
		read: func(br pgx.BatchResults) (err error) {
			t, ok, err = scanTakeFirst(br.QueryRow())
			return err
		},
	}
	if _, err := c.checkClinicGuest(ctx, tx, req.ClinicID, req.GuestID, prepay, req.DoctorID, days, nil, take); err != nil {
		return took{}, false, price, err
	}
	if !ok {
		// The slots seen open a moment ago went to others (or lie on days
		// the guest is busy): offer what is open now.
		// Not marked full: the slots may only be locked by holds still
		// running, and the next holds should try them, not read first.
		return took{}, false, price, slotTaken(ctx, tx, req.ClinicID, req.DoctorID, "", req.GuestID, req.WindowStart, fullWindowDetail)
	}
	return t, prepay, price, nil
}

// refuseSlot explains why a slot could not be taken: it has started
// (invalid_state) or someone else has it (slot_taken with alternatives).
func (c *ClinicStore) refuseSlot(ctx context.Context, tx pgx.Tx, clinicID, slotID, guestID string) error {
	var (
		doctorID string
		startsAt time.Time
		started  bool
	)
	err := tx.QueryRow(ctx, `SELECT doctor_id::TEXT, starts_at, starts_at <= now() FROM slots WHERE clinic_id = $1 AND slot_id = $2`,
		clinicID, slotID).Scan(&doctorID, &startsAt, &started)
	if errors.Is(err, pgx.ErrNoRows) {
		return berth.Errorf(berth.CodeNotFound, "slot %s not found", slotID)
	}
	if err != nil {
		return fmt.Errorf("read slot: %w", err)
	}
	if started {
		return berth.Errorf(berth.CodeInvalidState, "slot %s has already started", slotID)
	}
	return slotTaken(ctx, tx, clinicID, doctorID, slotID, guestID, startsAt, takenSlotDetail)
}

// apptHint is an appointment read without a lock: which slot to lock.
func apptHint(ctx context.Context, q querier, clinicID, apptID string) (appointment.Appointment, error) {
	a, err := scanAppointment(q.QueryRow(ctx,
		`SELECT `+appointmentColumns+` FROM appointments WHERE clinic_id = $1 AND appointment_id = $2`, clinicID, apptID))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, berth.Errorf(berth.CodeNotFound, "appointment %s not found", apptID)
	}
	if err != nil {
		return a, fmt.Errorf("read appointment: %w", err)
	}
	return a, nil
}

// lockAppointment locks an appointment whose slot the caller has locked and
// checks it is still on that slot; if it moved, the transaction runs again.
// lockSlotAndAppointment locks an appointment's slot, then the appointment
// itself — the partition's lock order, slots before appointments.
func lockSlotAndAppointment(ctx context.Context, tx pgx.Tx, clinicID, apptID, slotID string) (lockedSlot, appointment.Appointment, error) {
	locked, err := lockSlots(ctx, tx, clinicID, slotID)
	if err != nil {
		return lockedSlot{}, appointment.Appointment{}, err
	}
	a, err := lockAppointment(ctx, tx, clinicID, apptID, slotID)
	return locked[slotID], a, err
}

func lockAppointment(ctx context.Context, tx pgx.Tx, clinicID, apptID, slotID string) (appointment.Appointment, error) {
	a, err := scanAppointment(tx.QueryRow(ctx,
		`SELECT `+appointmentColumns+` FROM appointments WHERE clinic_id = $1 AND appointment_id = $2 FOR UPDATE`, clinicID, apptID))
	if err != nil {
		return a, fmt.Errorf("lock appointment: %w", err)
	}
	if a.SlotID != slotID {
		return a, fmt.Errorf("appointment %s moved while locking: %w", apptID, errRetry)
	}
	return a, nil
}

// queueAppointmentUpdate queues the row update of a transition; the caller
// has bumped the version.
func queueAppointmentUpdate(b *pgx.Batch, a appointment.Appointment, day time.Time) {
	b.Queue(`UPDATE appointments SET status = $3, slot_id = $4, doctor_id = $5, starts_at = $6, ends_at = $7, local_date = $8,
			hold_expires_at = $9, payment_ref = NULLIF($10, ''), version = $11, updated_at = $12
		WHERE clinic_id = $1 AND appointment_id = $2`,
		a.ClinicID, a.ID, string(a.Status), a.SlotID, a.DoctorID, a.StartsAt, a.EndsAt, day,
		a.HoldExpiresAt, a.PaymentRef, a.Version, a.UpdatedAt)
}

// appointmentDue is what an appointment's payment must match. One without
// a price (its doctor has none) can be settled only at the desk: -1 minor
// units is never paid.
func appointmentDue(a appointment.Appointment) payments.Due {
	d := payments.Due{Kind: string(berth.KindClinic), PartitionID: a.ClinicID, ReservationID: a.ID, AmountCents: -1, Currency: a.Currency}
	if a.PriceCents != nil {
		d.AmountCents = *a.PriceCents
	}
	return d
}

// Confirm confirms an appointment paid for by pay, by its holder (held_by):
// a held one — even if its hold lapsed — is confirmed as long as it still
// occupies its slot, i.e. nobody took the slot meanwhile. If someone did,
// the answer is a committed 409 hold_expired and a refund_requested event.
// The payment is decided against the locked row exactly as for hotels
// (Store.Confirm): a payment that does not settle is 402 payment_required,
// and a provider's money that cannot be applied is refunded.
func (c *ClinicStore) Confirm(ctx context.Context, clinicID, apptID string, pay payments.Payment, authorize func(guestID string) error,
	actor appointment.Actor, ch appointment.Channel, idem *berth.Idem) (berth.Response, error) {
	return c.s.write(ctx, berth.KindClinic, clinicID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		h, err := apptHint(ctx, tx, clinicID, apptID)
		if err != nil {
			return nil, err
		}
		if err := authorize(h.GuestID); err != nil {
			return nil, err
		}
		refundOf := func(a appointment.Appointment) func(reason string) error {
			return func(reason string) error {
				return queueEvents(ctx, b, c.s.region, refundEvent(berth.KindClinic, clinicID, a.ID, a.Version,
					"appointment", a, pay.Ref, pay.AmountCents, pay.Currency, reason))
			}
		}
		if h.Status == appointment.StatusConfirmed {
			return h, unappliedPayment(pay, h.PaymentRef, refundOf(h))
		}
		day := h.LocalDate.Time()
		if err := lockGuestDays(ctx, tx, clinicID, c.s.region, h.DoctorID, h.GuestID, []time.Time{day}); err != nil {
			return nil, err
		}
		l, a, err := lockSlotAndAppointment(ctx, tx, clinicID, apptID, h.SlotID)
		if err != nil {
			return nil, err
		}
		if ch == "" {
			ch = a.Channel
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		busy, err := liveElsewhere(ctx, tx, clinicID, a.DoctorID, a.GuestID, day, a.ID)
		if err != nil {
			return nil, err
		}
		ours := l.appointmentID == a.ID && l.status == appointment.SlotHeld
		step := appointment.DecideConfirm(appointment.ConfirmFacts{Status: a.Status, HoldsSlot: ours,
			Started: l.started, OtherLiveThatDay: busy})
		au := &audit{clinicID: clinicID, region: c.s.region}
		var evs []event
		won := false
		due := appointmentDue(a)
		switch step {
		case appointment.ConfirmAnswer:
			return a, unappliedPayment(pay, a.PaymentRef, refundOf(a))
		case appointment.ConfirmInvalid:
			return a, refusedPayment(pay, refundOf(a), fmt.Sprintf("a %s appointment cannot be confirmed", a.Status))
		}
		// Book, take again or lose: only for a payment that settles what is
		// due; any other changes nothing (a provider's money goes back).
		if err := pay.Settles(due); err != nil {
			return a, mismatchedPayment(pay, err, refundOf(a))
		}
		switch step {
		case appointment.ConfirmBook:
			b.Queue(`UPDATE slots SET status = 'booked', hold_expires_at = NULL, version = version + 1, updated_at = now()
				WHERE clinic_id = $1 AND slot_id = $2 AND appointment_id = $3`, clinicID, a.SlotID, a.ID)
			au.add(a.SlotID, a.ID, actor, ch, appointment.SlotHeld, appointment.SlotBooked)
			won = true
		case appointment.ConfirmTakeAgain:
			t, ok, err := takeSlot(ctx, tx, clinicID, a.SlotID, appointment.SlotBooked, a.GuestID, a.ID, 0, nil)
			if err != nil {
				return nil, err
			}
			if ok {
				if t.prevStatus == appointment.SlotHeld && t.prevAppt != "" && t.prevAppt != a.ID {
					ev, err := expireAppointment(ctx, tx, clinicID, t.prevAppt)
					if err != nil {
						return nil, err
					}
					evs = append(evs, ev...)
					au.add(a.SlotID, t.prevAppt, systemActor, appointment.ChannelSystem, appointment.SlotHeld, appointment.SlotOpen)
				}
				au.add(a.SlotID, a.ID, actor, ch, appointment.SlotOpen, appointment.SlotBooked)
				won = true
			}
		}
		a.PaymentRef, a.Version, a.UpdatedAt = pay.Ref, a.Version+1, now
		if won {
			a.Status, a.HoldExpiresAt = appointment.StatusConfirmed, nil
			queueAppointmentUpdate(b, a, day)
			queueSettleClinicOffer(b, a)
			au.flush(b)
			queuePaymentAudit(b, c.s.region, due, pay)
			return a, queueEvents(ctx, b, c.s.region, append(evs, appointmentEvent(appointment.EventConfirmed, a))...)
		}
		// Lost: the appointment is (or becomes) expired, and the payment goes back.
		if a.Status == appointment.StatusHeld {
			a.Status = appointment.StatusExpired
			if ours {
				queueReleaseSlot(b, clinicID, a.SlotID, a.ID)
				au.add(a.SlotID, a.ID, actor, ch, appointment.SlotHeld, appointment.SlotOpen)
			}
		}
		queueAppointmentUpdate(b, a, day)
		queueSettleClinicOffer(b, a)
		au.flush(b)
		evs = append(evs, appointmentEvent(appointment.EventExpired, a))
		if pay.TookMoney() {
			evs = append(evs, refundEvent(berth.KindClinic, clinicID, a.ID, a.Version, "appointment", a, pay.Ref,
				pay.AmountCents, pay.Currency, "hold_expired"))
		}
		if err := queueEvents(ctx, b, c.s.region, evs...); err != nil {
			return nil, err
		}
		return a, &berth.Error{Code: berth.CodeHoldExpired,
			Detail: "the hold lapsed and the slot was taken meanwhile; a refund was requested"}
	})
}

// Cancel cancels a live appointment; its slot reopens in the same transaction.
func (c *ClinicStore) Cancel(ctx context.Context, clinicID, apptID string, authorize func(guestID string) error,
	actor appointment.Actor, ch appointment.Channel, idem *berth.Idem) (berth.Response, error) {
	return c.cancel(ctx, clinicID, apptID, authorize, actor, ch, idem, false)
}

// cancel cancels a live appointment; with onlyHeld, an appointment in any
// other status is answered as it is and left alone (a failed payment
// releases a hold but never undoes a confirmed appointment).
func (c *ClinicStore) cancel(ctx context.Context, clinicID, apptID string, authorize func(guestID string) error,
	actor appointment.Actor, ch appointment.Channel, idem *berth.Idem, onlyHeld bool) (berth.Response, error) {
	return c.s.write(ctx, berth.KindClinic, clinicID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		h, err := apptHint(ctx, tx, clinicID, apptID)
		if err != nil {
			return nil, err
		}
		if err := authorize(h.GuestID); err != nil {
			return nil, err
		}
		l, a, err := lockSlotAndAppointment(ctx, tx, clinicID, apptID, h.SlotID)
		if err != nil {
			return nil, err
		}
		if ch == "" {
			ch = a.Channel
		}
		if onlyHeld && !appointment.CancelOnPaymentFailure(a.Status) {
			return a, nil
		}
		if !appointment.CanCancel(a.Status) {
			return a, berth.Errorf(berth.CodeInvalidState, "a %s appointment cannot be cancelled", a.Status)
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		au := &audit{clinicID: clinicID, region: c.s.region}
		if l.appointmentID == a.ID {
			queueReleaseSlot(b, clinicID, a.SlotID, a.ID)
			au.add(a.SlotID, a.ID, actor, ch, appointment.Shown(l.status, l.lapsed), appointment.SlotOpen)
		}
		a.Status, a.Version, a.UpdatedAt, a.HoldExpiresAt = appointment.StatusCancelled, a.Version+1, now, nil
		queueAppointmentUpdate(b, a, a.LocalDate.Time())
		queueSettleClinicOffer(b, a)
		au.flush(b)
		return a, queueEvents(ctx, b, c.s.region, appointmentEvent(appointment.EventCancelled, a))
	})
}

// Reschedule moves a live appointment to another slot in one transaction:
// both slots are locked in ascending id order, the new one is taken by the
// same conditional write as a hold, the old one reopens. A taken new slot
// is a committed 409 slot_taken with alternatives.
func (c *ClinicStore) Reschedule(ctx context.Context, clinicID, apptID, newSlotID string, authorize func(guestID string) error,
	actor appointment.Actor, ch appointment.Channel, idem *berth.Idem) (berth.Response, error) {
	return c.s.write(ctx, berth.KindClinic, clinicID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		h, err := apptHint(ctx, tx, clinicID, apptID)
		if err != nil {
			return nil, err
		}
		if err := authorize(h.GuestID); err != nil {
			return nil, err
		}
		nh, err := readSlotHint(ctx, tx, clinicID, newSlotID)
		if err != nil {
			return nil, err
		}
		if !appointment.CanReschedule(h.Status) {
			return h, berth.Errorf(berth.CodeInvalidState, "a %s appointment cannot be rescheduled", h.Status)
		}
		if newSlotID == h.SlotID {
			return h, nil
		}
		newDay := nh.localDate
		otherDay := nh.doctorID != h.DoctorID || !appointment.DateOf(newDay).Time().Equal(h.LocalDate.Time())
		if otherDay {
			if err := lockGuestDays(ctx, tx, clinicID, c.s.region, nh.doctorID, h.GuestID, []time.Time{newDay}); err != nil {
				return nil, err
			}
		}
		// Both slots in one statement, ascending id: two reschedules
		// crossing the same pair of slots queue up instead of deadlocking.
		locked, err := lockSlots(ctx, tx, clinicID, h.SlotID, newSlotID)
		if err != nil {
			return nil, err
		}
		old := locked[h.SlotID]
		a, err := lockAppointment(ctx, tx, clinicID, apptID, h.SlotID)
		if err != nil {
			return nil, err
		}
		if ch == "" {
			ch = a.Channel
		}
		if !appointment.CanReschedule(a.Status) {
			return a, berth.Errorf(berth.CodeInvalidState, "a %s appointment cannot be rescheduled", a.Status)
		}
		if a.Status == appointment.StatusHeld && a.WaitlistEntryID != "" {
			// An offer is for the slot its waiter asked for: confirm or
			// cancel it (docs/adr/0015-clinic-waitlist.md).
			return a, berth.Errorf(berth.CodeInvalidState, "a waitlist offer cannot be rescheduled; confirm or cancel it")
		}
		if old.appointmentID != a.ID || (a.Status == appointment.StatusHeld && old.lapsed) {
			return a, berth.Errorf(berth.CodeInvalidState, "the hold lapsed; hold the new slot instead")
		}
		if otherDay {
			busy, err := liveElsewhere(ctx, tx, clinicID, nh.doctorID, a.GuestID, newDay, a.ID)
			if err != nil {
				return nil, err
			}
			if err := onePerDay(newDay, busy); err != nil {
				return a, err
			}
		}
		t, ok, err := takeSlot(ctx, tx, clinicID, newSlotID, a.Status.SlotStatus(), a.GuestID, a.ID, 0, a.HoldExpiresAt)
		if err != nil {
			return nil, err
		}
		if !ok {
			return a, c.refuseSlot(ctx, tx, clinicID, newSlotID, a.GuestID)
		}
		au := &audit{clinicID: clinicID, region: c.s.region}
		var evs []event
		if t.prevStatus == appointment.SlotHeld && t.prevAppt != "" {
			ev, err := expireAppointment(ctx, tx, clinicID, t.prevAppt)
			if err != nil {
				return nil, err
			}
			evs = append(evs, ev...)
			au.add(newSlotID, t.prevAppt, systemActor, appointment.ChannelSystem, appointment.SlotHeld, appointment.SlotOpen)
		}
		queueReleaseSlot(b, clinicID, a.SlotID, a.ID)
		au.add(a.SlotID, a.ID, actor, ch, old.status, appointment.SlotOpen)
		au.add(newSlotID, a.ID, actor, ch, appointment.SlotOpen, a.Status.SlotStatus())
		a.SlotID, a.DoctorID, a.StartsAt, a.EndsAt = newSlotID, t.doctorID, t.startsAt, t.endsAt
		a.LocalDate, a.Version, a.UpdatedAt = appointment.DateOf(t.localDate), a.Version+1, t.now
		queueAppointmentUpdate(b, a, t.localDate)
		au.flush(b)
		return a, queueEvents(ctx, b, c.s.region, append(evs, appointmentEvent(appointment.EventRescheduled, a))...)
	})
}

// insertAppointmentSQL records a new appointment (a hold, or one confirmed
// at once) in the transaction that took its slot.
const insertAppointmentSQL = `INSERT INTO appointments (clinic_id, appointment_id, home_region, doctor_id, slot_id, guest_id, starts_at,
				ends_at, local_date, status, channel, created_by_subject, created_by_role, hold_expires_at, version, created_at, updated_at,
				price_cents, currency, contact_email, contact_phone, contact_push_token)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 1, $15, $15, $16, NULLIF($17, ''), NULLIF($18, ''), NULLIF($19, ''),
				NULLIF($20, ''))`

// waitFlight waits for wait to close, and says whether it did before the
// deadline and before ctx ended.
func waitFlight(ctx context.Context, wait <-chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-wait:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}
