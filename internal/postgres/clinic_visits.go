package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/jackc/pgx/v5"
)

// The visit at the reception: arrived, completed, and the no-show job. The
// decisions are package appointment's (DecideArrive, DecideComplete,
// DecideNoShow, ChargeOnNoShow); these methods read the facts under the
// appointment's lock and execute them. None of them touches the slot: a
// visit, held or missed, keeps its slot booked (appointment.Status.Occupies),
// so each takes one row lock, the appointment's, and nothing after it (the
// reception's exception in docs/adr/0003-lock-order.md).

// occupiesSQL is appointment.Status.Occupies over an appointment row a: the
// appointments a slot names (the audit's slot checks use it);
// TestOccupiesSQLIsAppointmentOccupies holds the two together.
const occupiesSQL = `(a.status IN ('held', 'confirmed', 'arrived', 'completed', 'no_show'))`

// lockVisit locks an appointment for a reception action.
func lockVisit(ctx context.Context, tx pgx.Tx, clinicID, apptID string) (appointment.Appointment, error) {
	a, err := scanAppointment(tx.QueryRow(ctx,
		`SELECT `+appointmentColumns+` FROM appointments WHERE clinic_id = $1 AND appointment_id = $2 FOR UPDATE`, clinicID, apptID))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, berth.Errorf(berth.CodeNotFound, "appointment %s not found", apptID)
	}
	if err != nil {
		return a, fmt.Errorf("lock appointment: %w", err)
	}
	return a, nil
}

// queueVisitStatus queues the status change of a reception action and
// bumps the appointment's version.
func queueVisitStatus(b *pgx.Batch, a *appointment.Appointment, to appointment.Status, now time.Time) {
	a.Status, a.Version, a.UpdatedAt = to, a.Version+1, now
	b.Queue(`UPDATE appointments SET status = $3, version = $4, updated_at = $5 WHERE clinic_id = $1 AND appointment_id = $2`,
		a.ClinicID, a.ID, string(to), a.Version, now)
}

// Arrive marks a confirmed appointment's patient arrived, on the visit's
// day by the clinic's date; 409 invalid_state otherwise (held, cancelled, a
// no-show already marked, another day). Marking an arrived one again
// answers it unchanged.
func (c *ClinicStore) Arrive(ctx context.Context, clinicID, apptID string, idem *berth.Idem) (berth.Response, error) {
	loc, err := c.clinicLocation(ctx, clinicID)
	if err != nil {
		return berth.Response{}, err
	}
	return c.s.write(ctx, berth.KindClinic, clinicID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		a, err := lockVisit(ctx, tx, clinicID, apptID)
		if err != nil {
			return nil, err
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		today := appointment.DateOf(now.In(loc))
		switch appointment.DecideArrive(appointment.ArriveFacts{Status: a.Status, Day: a.LocalDate, Today: today}) {
		case appointment.VisitAnswer:
			return a, nil
		case appointment.VisitRefuse:
			return a, berth.Errorf(berth.CodeInvalidState, "a %s appointment cannot be marked arrived", a.Status)
		case appointment.VisitTooEarly:
			return a, berth.Errorf(berth.CodeInvalidState, "the visit is on %s; it is %s at the clinic", a.LocalDate, today)
		case appointment.VisitOver:
			return a, berth.Errorf(berth.CodeInvalidState, "the visit was on %s", a.LocalDate)
		}
		queueVisitStatus(b, &a, appointment.StatusArrived, now)
		return a, queueEvents(ctx, b, c.s.region, appointmentEvent(appointment.EventArrived, a))
	})
}

// Complete marks an arrived patient's visit completed; 409 invalid_state
// for any other status but completed, which is answered unchanged.
func (c *ClinicStore) Complete(ctx context.Context, clinicID, apptID string, idem *berth.Idem) (berth.Response, error) {
	return c.s.write(ctx, berth.KindClinic, clinicID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		a, err := lockVisit(ctx, tx, clinicID, apptID)
		if err != nil {
			return nil, err
		}
		switch appointment.DecideComplete(a.Status) {
		case appointment.VisitAnswer:
			return a, nil
		case appointment.VisitApply:
		default:
			return a, berth.Errorf(berth.CodeInvalidState, "a %s appointment cannot be completed (mark the patient arrived first)", a.Status)
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		queueVisitStatus(b, &a, appointment.StatusCompleted, now)
		return a, queueEvents(ctx, b, c.s.region, appointmentEvent(appointment.EventCompleted, a))
	})
}

// DayList is the reception's list of a doctor's appointments on a local
// day: those the patients are expected or seen for
// (appointment.DayListStatuses), by start, with their contact data.
func (c *ClinicStore) DayList(ctx context.Context, clinicID, doctorID string, day appointment.Date) ([]appointment.Appointment, error) {
	docs, err := c.doctors(ctx, c.s.db.pool, clinicID, doctorID)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		if _, err := c.GetClinic(ctx, clinicID); err != nil {
			return nil, err
		}
		return nil, berth.Errorf(berth.CodeNotFound, "doctor %s not found", doctorID)
	}
	statuses := make([]string, len(appointment.DayListStatuses))
	for i, s := range appointment.DayListStatuses {
		statuses[i] = string(s)
	}
	rows, err := c.s.db.pool.Query(ctx, `SELECT `+appointmentColumns+` FROM appointments
		WHERE clinic_id = $1 AND doctor_id = $2 AND local_date = $3 AND status = ANY($4::TEXT[])
		ORDER BY starts_at, appointment_id LIMIT 2000`, clinicID, doctorID, day.Time(), statuses)
	if err != nil {
		return nil, classify(fmt.Errorf("day list: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (appointment.Appointment, error) { return scanAppointment(row) })
	if err != nil {
		return nil, classify(fmt.Errorf("day list: %w", err))
	}
	if out == nil {
		out = []appointment.Appointment{}
	}
	return out, nil
}

// VisitNoShowOptions tune MarkNoShows.
type VisitNoShowOptions struct {
	// Grace is how long after the slot's end a confirmed patient who has not
	// arrived becomes a no-show (appointment.DefaultNoShowGrace when 0).
	Grace time.Duration
	// Lookback bounds how far back slot ends are considered (older
	// confirmed appointments, from before the reception marked visits, are
	// left alone).
	Lookback time.Duration
	// Limit bounds the appointments marked per call.
	Limit int
}

// MarkNoShows marks the confirmed appointments of clinics homed in this
// region whose patient never arrived, once the slot's end plus the grace
// period has passed at now. The slot stays booked (its time is spent and
// is never sold again) and a paid appointment stays charged (the
// appointment.no_show event carries the charge). Each one is its own
// fenced write that re-reads the status under the appointment's lock, so
// an arrival or a cancel that won the race is left alone, and a second run
// — or the same job in every booking service at once — changes nothing.
func (c *ClinicStore) MarkNoShows(ctx context.Context, now time.Time, o VisitNoShowOptions) (int, error) {
	if o.Grace <= 0 {
		o.Grace = appointment.DefaultNoShowGrace
	}
	if o.Lookback <= 0 {
		o.Lookback = 7 * 24 * time.Hour
	}
	if o.Limit <= 0 {
		o.Limit = 200
	}
	due := now.Add(-o.Grace) // a slot ending at or before this is due (appointment.NoShowAt)
	rows, err := c.s.db.pool.Query(ctx, `SELECT clinic_id::TEXT, appointment_id::TEXT FROM appointments
		WHERE home_region = $1 AND status = 'confirmed' AND ends_at <= $2 AND ends_at >= $3
		ORDER BY ends_at, clinic_id, appointment_id LIMIT $4`,
		c.s.region, due, due.Add(-o.Lookback), o.Limit)
	if err != nil {
		return 0, classify(fmt.Errorf("find no-shows: %w", err))
	}
	type cand struct{ clinicID, id string }
	cands, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (cand, error) {
		var k cand
		return k, row.Scan(&k.clinicID, &k.id)
	})
	if err != nil {
		return 0, classify(fmt.Errorf("find no-shows: %w", err))
	}
	marked := 0
	for _, k := range cands {
		ok, err := c.markNoShow(ctx, k.clinicID, k.id, now, o.Grace)
		if berth.ErrorCode(err) == berth.CodeMisdirected || berth.ErrorCode(err) == berth.CodeNotFound {
			continue // moved away: its new home marks it
		}
		if err != nil {
			return marked, err
		}
		if ok {
			marked++
		}
	}
	return marked, nil
}

// markNoShow marks one appointment a no-show if, under its lock, it still
// is one at the job's instant now, and reports whether it did.
func (c *ClinicStore) markNoShow(ctx context.Context, clinicID, apptID string, now time.Time, grace time.Duration) (bool, error) {
	var marked bool
	_, err := c.s.write(ctx, berth.KindClinic, clinicID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		marked = false
		a, err := lockVisit(ctx, tx, clinicID, apptID)
		if err != nil {
			return nil, err
		}
		if !appointment.DecideNoShow(a.Status, a.EndsAt, now, grace) {
			return nil, nil // arrived late, cancelled, or marked already
		}
		at, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		queueVisitStatus(b, &a, appointment.StatusNoShow, at)
		marked = true
		return nil, queueEvents(ctx, b, c.s.region, event{kind: berth.KindClinic, partitionID: clinicID,
			typ: appointment.EventNoShow, aggregateID: a.ID, version: a.Version,
			data: appointment.NoShowEvent{Appointment: a, Charge: appointment.ChargeOnNoShow(a)}})
	})
	if err != nil {
		return false, err
	}
	return marked, nil
}
