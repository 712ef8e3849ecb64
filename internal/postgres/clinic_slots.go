package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// takeableSQL is the one rule of who may take a slot, in database time: an
// open slot, or a held one whose hold lapsed. Nothing sweeps lapsed holds;
// every write and read treats them as open. It is appointment.Takeable in
// database time; TestTakeableSQLIsAppointmentTakeable holds the two together.
const takeableSQL = `(s.status = 'open' OR (s.status = 'held' AND s.hold_expires_at < now()))`

// shownStatusSQL is the status a client sees (a lapsed hold shows as open).
const shownStatusSQL = `CASE WHEN s.status = 'held' AND s.hold_expires_at < now() THEN 'open' ELSE s.status END`

// ListSlots returns a doctor's slots of one local day. It reads the local
// database (seconds stale on follower reads) and never feeds a write.
func (c *ClinicStore) ListSlots(ctx context.Context, clinicID, doctorID string, day appointment.Date) (appointment.SlotList, error) {
	cl, err := c.GetClinic(ctx, clinicID)
	if err != nil {
		return appointment.SlotList{}, err
	}
	list := appointment.SlotList{DoctorID: doctorID, Date: day, Timezone: cl.Timezone, Slots: []appointment.Slot{}}
	docs, err := c.doctors(ctx, c.s.db.pool, clinicID, doctorID)
	if err != nil {
		return list, err
	}
	if len(docs) == 0 {
		return list, berth.Errorf(berth.CodeNotFound, "doctor %s not found", doctorID)
	}
	rows, err := c.s.db.pool.Query(ctx,
		`SELECT s.slot_id::TEXT, s.starts_at, s.ends_at, `+shownStatusSQL+`
		 FROM slots s WHERE s.clinic_id = $1 AND s.doctor_id = $2 AND s.local_date = $3
		 ORDER BY s.starts_at`, clinicID, doctorID, day.Time())
	if err != nil {
		return list, classify(fmt.Errorf("list slots: %w", err))
	}
	slots, err := pgx.CollectRows(rows, scanSlot)
	if err != nil {
		return list, classify(fmt.Errorf("list slots: %w", err))
	}
	list.Slots = append(list.Slots, slots...)
	return list, nil
}

func scanSlot(row pgx.CollectableRow) (appointment.Slot, error) {
	var (
		sl     appointment.Slot
		status string
	)
	err := row.Scan(&sl.ID, &sl.StartsAt, &sl.EndsAt, &status)
	sl.Status = appointment.SlotStatus(status)
	sl.StartsAt, sl.EndsAt = sl.StartsAt.UTC(), sl.EndsAt.UTC()
	return sl, err
}

// alternatives returns what a 409 slot_taken offers guestID: up to three
// open future slots of a doctor near around (excluding one slot), nearest
// first, spread over the guests who lost the same slot
// (appointment.SpreadAlternatives decides; this reads its candidates, the
// nearest open slots on either side of around).
func alternatives(ctx context.Context, q querier, clinicID, doctorID, excludeSlotID, guestID string, around time.Time) ([]appointment.Slot, error) {
	rows, err := q.Query(ctx, alternativesSQL, clinicID, doctorID, excludeSlotID, around, appointment.AlternativeCandidates)
	if err != nil {
		return nil, fmt.Errorf("alternatives: %w", err)
	}
	return spreadAlternatives(rows, doctorID, guestID, around)
}

// alternativesSQL reads the candidates of alternatives: the nearest open
// future slots of doctor $2 on either side of $4, at most $5 on each,
// excluding slot $3.
const alternativesSQL = `
	(SELECT s.slot_id::TEXT, s.starts_at, s.ends_at, 'open' FROM slots s
	 WHERE s.clinic_id = $1 AND s.doctor_id = $2 AND s.slot_id::TEXT <> $3 AND s.starts_at >= $4
	   AND s.starts_at > now() AND ` + takeableSQL + `
	 ORDER BY s.starts_at LIMIT $5)
	UNION ALL
	(SELECT s.slot_id::TEXT, s.starts_at, s.ends_at, 'open' FROM slots s
	 WHERE s.clinic_id = $1 AND s.doctor_id = $2 AND s.slot_id::TEXT <> $3 AND s.starts_at < $4
	   AND s.starts_at > now() AND ` + takeableSQL + `
	 ORDER BY s.starts_at DESC LIMIT $5)`

// slotAlternativesSQL is alternativesSQL around slot $2 itself, its doctor
// and start read from its row: the candidates of the alternatives to a
// hold of that slot, in the same round trip as the read that finds it
// taken (refuseTakenSlot). No rows when there is no such slot. The two
// sides are a LATERAL subquery of the slot's row, so each is an index scan
// in starts_at order that stops at its LIMIT, as alternativesSQL's are
// (joined instead, the plan sorted every slot on each side first: 0.6 ms
// against 0.1 by EXPLAIN ANALYZE).
const slotAlternativesSQL = `
	SELECT a.* FROM slots sl, LATERAL (
	(SELECT s.slot_id::TEXT, s.starts_at, s.ends_at, 'open' FROM slots s
	 WHERE s.clinic_id = $1 AND s.doctor_id = sl.doctor_id AND s.slot_id <> $2 AND s.starts_at >= sl.starts_at
	   AND s.starts_at > now() AND ` + takeableSQL + `
	 ORDER BY s.starts_at LIMIT $3)
	UNION ALL
	(SELECT s.slot_id::TEXT, s.starts_at, s.ends_at, 'open' FROM slots s
	 WHERE s.clinic_id = $1 AND s.doctor_id = sl.doctor_id AND s.slot_id <> $2 AND s.starts_at < sl.starts_at
	   AND s.starts_at > now() AND ` + takeableSQL + `
	 ORDER BY s.starts_at DESC LIMIT $3)) a
	WHERE sl.clinic_id = $1 AND sl.slot_id = $2`

// spreadAlternatives reads the rows of alternativesSQL and chooses the
// guest's alternatives among them.
func spreadAlternatives(rows pgx.Rows, doctorID, guestID string, around time.Time) ([]appointment.Slot, error) {
	open, err := pgx.CollectRows(rows, scanSlot)
	if err != nil {
		return nil, fmt.Errorf("alternatives: %w", err)
	}
	return spreadOpen(open, doctorID, guestID, around), nil
}

// spreadOpen chooses the guest's alternatives among the candidates read.
func spreadOpen(open []appointment.Slot, doctorID, guestID string, around time.Time) []appointment.Slot {
	alts := appointment.SpreadAlternatives(guestID, around, open)
	for i := range alts {
		alts[i].DoctorID = doctorID
	}
	if alts == nil {
		alts = []appointment.Slot{}
	}
	return alts
}

// slotTakenWith is the 409 answer naming the given alternatives.
func slotTakenWith(alts []appointment.Slot, detail string) error {
	return &berth.Error{Code: berth.CodeSlotTaken, Detail: detail, Extra: map[string]any{"alternatives": alts}}
}

// slotTaken builds the 409 answer naming the alternatives offered guestID.
func slotTaken(ctx context.Context, tx pgx.Tx, clinicID, doctorID, slotID, guestID string, around time.Time, detail string) error {
	alts, err := alternatives(ctx, tx, clinicID, doctorID, slotID, guestID, around)
	if err != nil {
		return err
	}
	return slotTakenWith(alts, detail)
}

// slotHint is what a slot row says about itself outside any lock; these
// columns never change, so a hint is enough to choose which locks to take.
type slotHint struct {
	doctorID  string
	startsAt  time.Time
	localDate time.Time
	prepay    bool
	price     doctorPrice
	// taken: as of the read, the slot has not started and someone holds
	// or booked it (or it is blocked). Unlike the columns above it may
	// change at once; it only lets a loser be answered without waiting.
	taken bool
}

// doctorPrice is what a prepaid appointment of a doctor costs (nil: no
// online payment).
type doctorPrice struct {
	cents    *int64
	currency string
}

// slotHintSQL reads a slot's hint: its doctor, start, day and the doctor's
// price, and whether someone holds or booked it (taken).
const slotHintSQL = `SELECT s.doctor_id::TEXT, s.starts_at, s.local_date, d.prepay_required, d.price_cents, COALESCE(d.currency, ''),
	        s.starts_at > now() AND NOT ` + takeableSQL + `
	 FROM slots s JOIN doctors d ON d.clinic_id = s.clinic_id AND d.doctor_id = s.doctor_id
	 WHERE s.clinic_id = $1 AND s.slot_id = $2`

// scanSlotHint scans a row of slotHintSQL into h.
func scanSlotHint(row pgx.Row, h *slotHint) error {
	return row.Scan(&h.doctorID, &h.startsAt, &h.localDate, &h.prepay, &h.price.cents, &h.price.currency, &h.taken)
}

func readSlotHint(ctx context.Context, q querier, clinicID, slotID string) (slotHint, error) {
	var h slotHint
	err := slotHintErr(scanSlotHint(q.QueryRow(ctx, slotHintSQL, clinicID, slotID), &h), slotID)
	return h, err
}

// slotHintErr is what the read of a slot's hint failing with err means.
func slotHintErr(err error, slotID string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return berth.Errorf(berth.CodeNotFound, "slot %s not found", slotID)
	}
	if err != nil {
		return fmt.Errorf("read slot: %w", err)
	}
	return nil
}

// slotFirstRead is readSlotHint for a hold of one slot as a firstReads:
// the read travels in the transaction's first round trip, behind the fence
// and the key claim, and fills h.
func slotFirstRead(req appointment.HoldRequest, h *slotHint) *firstReads {
	return &firstReads{
		queue: func(b *pgx.Batch) { b.Queue(slotHintSQL, req.ClinicID, req.SlotID) },
		read: func(br pgx.BatchResults) error {
			*h = slotHint{}
			return slotHintErr(scanSlotHint(br.QueryRow(), h), req.SlotID)
		},
	}
}

// lockedSlot is a slot row read under its lock.
type lockedSlot struct {
	id            string
	status        appointment.SlotStatus
	appointmentID string
	lapsed        bool
	started       bool
}

// lockSlots locks slots in ascending id order — the partition's lock order —
// and returns them by id.
func lockSlots(ctx context.Context, tx pgx.Tx, clinicID string, ids ...string) (map[string]lockedSlot, error) {
	rows, err := tx.Query(ctx,
		`SELECT s.slot_id::TEXT, s.status, COALESCE(s.appointment_id::TEXT, ''),
		        s.status = 'held' AND s.hold_expires_at < now(), s.starts_at <= now()
		 FROM slots s WHERE s.clinic_id = $1 AND s.slot_id = ANY($2::UUID[])
		 ORDER BY s.slot_id FOR UPDATE`, clinicID, ids)
	if err != nil {
		return nil, fmt.Errorf("lock slots: %w", err)
	}
	out := map[string]lockedSlot{}
	for rows.Next() {
		var (
			l      lockedSlot
			status string
		)
		if err := rows.Scan(&l.id, &status, &l.appointmentID, &l.lapsed, &l.started); err != nil {
			rows.Close()
			return nil, fmt.Errorf("lock slots: %w", err)
		}
		l.status = appointment.SlotStatus(status)
		out[l.id] = l
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock slots: %w", err)
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, berth.Errorf(berth.CodeNotFound, "slot %s not found", id)
		}
	}
	return out, nil
}

// takeSlotSQL is the conditional write that decides who gets a slot: it
// locks the row, and updates it only if it is takeable by database time
// and has not started. One row back = this transaction won. It also returns
// what the slot was before (a lapsed holder must be expired). The row to
// update is named by its key ($1, $2), not only by the join with old: on a
// table without statistics (a fresh database) the join alone let the plan
// find it by a scan of every future slot of the clinic, joined to old
// (105 buffers a take at 3,456 slots, against 15 by the key; ADR 0011).
const takeSlotSQL = `
WITH old AS (
    SELECT slot_id, status, appointment_id FROM slots
    WHERE clinic_id = $1 AND slot_id = $2
    FOR UPDATE
)
UPDATE slots AS s SET
    status = $3, held_by = $4, appointment_id = $5,
    hold_expires_at = CASE WHEN $3 = 'held' THEN COALESCE($7::TIMESTAMPTZ, now() + $6 * INTERVAL '1 microsecond') END,
    version = s.version + 1, updated_at = now()
FROM old
WHERE s.clinic_id = $1 AND s.slot_id = $2 AND s.slot_id = old.slot_id AND s.starts_at > now() AND ` + takeableSQL + `
RETURNING old.status, COALESCE(old.appointment_id::TEXT, ''), s.doctor_id::TEXT, s.starts_at, s.ends_at,
          s.local_date, s.hold_expires_at, now()`

// took is what takeSlot learned.
type took struct {
	slotID        string
	prevStatus    appointment.SlotStatus
	prevAppt      string
	doctorID      string
	startsAt      time.Time
	endsAt        time.Time
	localDate     time.Time
	holdExpiresAt *time.Time
	now           time.Time
}

// takeSlot runs takeSlotSQL; ok is false when the slot was not takeable.
func takeSlot(ctx context.Context, tx pgx.Tx, clinicID, slotID string, to appointment.SlotStatus, guestID, apptID string,
	ttl time.Duration, expiresAt *time.Time) (took, bool, error) {
	return scanTakeSlot(tx.QueryRow(ctx, takeSlotSQL, takeSlotArgs(clinicID, slotID, to, guestID, apptID, ttl, expiresAt)...), slotID)
}

// queueTakeSlot queues takeSlotSQL for a new hold of one slot; scanTakeSlot
// reads its row (ok is false when the slot was not takeable).
func queueTakeSlot(b *pgx.Batch, req appointment.HoldRequest, to appointment.SlotStatus, ttl time.Duration) {
	b.Queue(takeSlotSQL, takeSlotArgs(req.ClinicID, req.SlotID, to, req.GuestID, req.AppointmentID, ttl, nil)...)
}

// takeSlotArgs are takeSlotSQL's parameters.
func takeSlotArgs(clinicID, slotID string, to appointment.SlotStatus, guestID, apptID string, ttl time.Duration, expiresAt *time.Time) []any {
	return []any{clinicID, slotID, string(to), guestID, apptID, ttl.Microseconds(), expiresAt}
}

// scanTakeSlot reads the row of a take of slot slotID.
func scanTakeSlot(row pgx.Row, slotID string) (took, bool, error) {
	var (
		t    took
		prev string
	)
	t.slotID = slotID
	err := row.Scan(&prev, &t.prevAppt, &t.doctorID, &t.startsAt, &t.endsAt, &t.localDate, &t.holdExpiresAt, &t.now)
	return t.finish(prev, err, "take slot")
}

// takeFirstSQL is takeSlotSQL for a window: in one statement it picks the
// first takeable slot of the doctor starting in [$3, $4), on a day the
// guest ($5) has no appointment with the doctor that counts (found by the
// guest's key, as countClinicGuestSQL finds them), and takes it.
// FOR UPDATE SKIP LOCKED makes concurrent requests pick different slots
// instead of queueing on the same one; a slot changed by a transaction
// that committed after this statement began is re-checked under its lock
// (READ COMMITTED) and skipped when no longer takeable. No row back = the
// window has no slot left for this guest. The order is starts_at alone:
// unique per doctor (slots_doctor_start_unique), so the index scan yields
// it and stops at the first slot that qualifies — with a tie-break column
// the generic plan of the prepared statement sorted every open slot of the
// window first (53 ms instead of 2 for a month of 5-minute slots).
const takeFirstSQL = `
WITH pick AS (
    SELECT s.slot_id, s.status, s.appointment_id FROM slots s
    WHERE s.clinic_id = $1 AND s.doctor_id = $2 AND s.starts_at >= $3 AND s.starts_at < $4
      AND s.starts_at > now() AND ` + takeableSQL + `
      AND NOT EXISTS (SELECT 1 FROM appointments a
          WHERE (a.clinic_id::TEXT || a.guest_id) = (s.clinic_id::TEXT || $5::TEXT) AND a.status IN ('held', 'confirmed')
            AND a.doctor_id = s.doctor_id AND a.local_date = s.local_date AND ` + countsSQL + `)
    ORDER BY s.starts_at LIMIT 1
    FOR UPDATE OF s SKIP LOCKED
)
UPDATE slots AS s SET
    status = $6, held_by = $5, appointment_id = $7,
    hold_expires_at = CASE WHEN $6 = 'held' THEN now() + $8 * INTERVAL '1 microsecond' END,
    version = s.version + 1, updated_at = now()
FROM pick
WHERE s.clinic_id = $1 AND s.slot_id = pick.slot_id
RETURNING s.slot_id::TEXT, pick.status, COALESCE(pick.appointment_id::TEXT, ''), s.doctor_id::TEXT, s.starts_at, s.ends_at,
          s.local_date, s.hold_expires_at, now()`

// queueTakeFirst queues takeFirstSQL for a hold by window; scanTakeFirst
// reads its row (ok is false when no slot of the window was left for the
// guest).
func queueTakeFirst(b *pgx.Batch, req appointment.HoldRequest, to appointment.SlotStatus, ttl time.Duration) {
	b.Queue(takeFirstSQL, req.ClinicID, req.DoctorID, req.WindowStart, req.WindowEnd, req.GuestID,
		string(to), req.AppointmentID, ttl.Microseconds())
}

func scanTakeFirst(row pgx.Row) (took, bool, error) {
	var (
		t    took
		prev string
	)
	err := row.Scan(&t.slotID, &prev, &t.prevAppt, &t.doctorID, &t.startsAt, &t.endsAt, &t.localDate, &t.holdExpiresAt, &t.now)
	return t.finish(prev, err, "take a slot in the window")
}

// finish completes what a take statement scanned: no row is not taken.
func (t took) finish(prev string, err error, what string) (took, bool, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("%s: %w", what, err)
	}
	t.prevStatus = appointment.SlotStatus(prev)
	t.startsAt, t.endsAt, t.now = t.startsAt.UTC(), t.endsAt.UTC(), t.now.UTC()
	if t.holdExpiresAt != nil {
		u := t.holdExpiresAt.UTC()
		t.holdExpiresAt = &u
	}
	return t, true, nil
}

// queueReleaseSlot reopens a slot occupied by apptID.
func queueReleaseSlot(b *pgx.Batch, clinicID, slotID, apptID string) {
	b.Queue(`UPDATE slots SET status = 'open', held_by = NULL, hold_expires_at = NULL, appointment_id = NULL,
			version = version + 1, updated_at = now()
		WHERE clinic_id = $1 AND slot_id = $2 AND appointment_id = $3`, clinicID, slotID, apptID)
}

// audit collects the slot transitions of one transaction; flush queues them.
type audit struct {
	clinicID, region string
	rows             []auditRow
}

type auditRow struct {
	slotID, apptID string
	actor          appointment.Actor
	channel        appointment.Channel
	from, to       appointment.SlotStatus
}

// systemActor is who gives up a lapsed hold when someone else takes its slot.
var systemActor = appointment.Actor{Subject: "berth", Role: "system"}

func (a *audit) add(slotID, apptID string, actor appointment.Actor, ch appointment.Channel, from, to appointment.SlotStatus) {
	a.rows = append(a.rows, auditRow{slotID, apptID, actor, ch, from, to})
}

// insertSlotAuditSQL records one transition of a slot.
const insertSlotAuditSQL = `INSERT INTO slot_audit (clinic_id, slot_id, audit_id, home_region, seq, actor_subject, actor_role,
				channel, from_status, to_status, appointment_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULLIF($11, '')::UUID)`

func (a *audit) flush(b *pgx.Batch) {
	for i, r := range a.rows {
		// A new id per attempt is fine: a rolled-back attempt's row never existed.
		b.Queue(insertSlotAuditSQL,
			a.clinicID, r.slotID, uuid.NewString(), a.region, i, r.actor.Subject, r.actor.Role,
			string(r.channel), string(r.from), string(r.to), r.apptID)
	}
}

// SlotAudit returns every recorded transition of a slot, oldest first.
func (c *ClinicStore) SlotAudit(ctx context.Context, clinicID, slotID string) ([]appointment.AuditEvent, error) {
	if _, err := readSlotHint(ctx, c.s.db.pool, clinicID, slotID); err != nil {
		return nil, classify(err)
	}
	rows, err := c.s.db.pool.Query(ctx,
		`SELECT at, actor_subject, actor_role, channel, from_status, to_status, COALESCE(appointment_id::TEXT, '')
		 FROM slot_audit WHERE clinic_id = $1 AND slot_id = $2 ORDER BY at, seq, audit_id`, clinicID, slotID)
	if err != nil {
		return nil, classify(fmt.Errorf("slot audit: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (appointment.AuditEvent, error) {
		var (
			e  appointment.AuditEvent
			ch string
		)
		err := row.Scan(&e.At, &e.Actor, &e.ActorRole, &ch, &e.FromStatus, &e.ToStatus, &e.AppointmentID)
		e.Channel, e.At = appointment.Channel(ch), e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, classify(fmt.Errorf("slot audit: %w", err))
	}
	if out == nil {
		out = []appointment.AuditEvent{}
	}
	return out, nil
}

// BlockSlot takes a slot out of sale (staff). A lapsed hold on it is given
// up; a live hold or booking is refused (409 invalid_state). Blocking a
// blocked slot changes nothing.
func (c *ClinicStore) BlockSlot(ctx context.Context, clinicID, slotID string, actor appointment.Actor, ch appointment.Channel, idem *berth.Idem) (berth.Response, error) {
	return c.s.write(ctx, berth.KindClinic, clinicID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		locked, err := lockSlots(ctx, tx, clinicID, slotID)
		if err != nil {
			return nil, err
		}
		l := locked[slotID]
		var sl appointment.Slot
		err = tx.QueryRow(ctx, `SELECT s.slot_id::TEXT, s.starts_at, s.ends_at, `+shownStatusSQL+`
			FROM slots s WHERE s.clinic_id = $1 AND s.slot_id = $2`, clinicID, slotID).
			Scan(&sl.ID, &sl.StartsAt, &sl.EndsAt, &sl.Status)
		if err != nil {
			return nil, fmt.Errorf("read slot: %w", err)
		}
		sl.StartsAt, sl.EndsAt = sl.StartsAt.UTC(), sl.EndsAt.UTC()
		if l.status == appointment.SlotBlocked {
			return sl, nil
		}
		if !appointment.CanBlock(l.status, l.lapsed) {
			return sl, berth.Errorf(berth.CodeInvalidState, "a %s slot cannot be blocked; cancel its appointment first", l.status)
		}
		a := &audit{clinicID: clinicID, region: c.s.region}
		var evs []event
		if l.status == appointment.SlotHeld && l.appointmentID != "" {
			ev, err := expireAppointment(ctx, tx, clinicID, l.appointmentID)
			if err != nil {
				return nil, err
			}
			evs = append(evs, ev...)
			a.add(slotID, l.appointmentID, systemActor, appointment.ChannelSystem, appointment.SlotHeld, appointment.SlotOpen)
		}
		b.Queue(`UPDATE slots SET status = 'blocked', held_by = NULL, hold_expires_at = NULL, appointment_id = NULL,
				version = version + 1, updated_at = now() WHERE clinic_id = $1 AND slot_id = $2`, clinicID, slotID)
		a.add(slotID, "", actor, ch, appointment.SlotOpen, appointment.SlotBlocked)
		a.flush(b)
		sl.Status = appointment.SlotBlocked
		evs = append(evs, event{kind: berth.KindClinic, partitionID: clinicID, typ: appointment.EventSlotBlocked,
			aggregateID: slotID, version: 1, data: sl})
		return sl, queueEvents(ctx, b, c.s.region, evs...)
	})
}
