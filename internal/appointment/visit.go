package appointment

import "time"

// The visit at the reception (issue: the visit end to end): a confirmed
// appointment's patient arrives and is seen, or never comes.
const (
	// StatusArrived: the reception saw the patient come in.
	StatusArrived Status = "arrived"
	// StatusCompleted: the visit took place and is over.
	StatusCompleted Status = "completed"
)

// Event types of the visit.
const (
	EventArrived   = "appointment.arrived"
	EventCompleted = "appointment.completed"
	EventNoShow    = "appointment.no_show"
)

// DefaultNoShowGrace is how long after a slot's end a confirmed patient who
// has not arrived becomes a no-show, unless configured otherwise.
const DefaultNoShowGrace = 30 * time.Minute

// Occupies reports whether an appointment in status s is the one its slot
// names: a live one, and one whose visit happened or was missed. A visit
// never gives its slot back — arrived, completed or missed, the slot's time
// is spent — so the slot stays booked for it and is never sold again. The
// audit (`booking verify`) says the same in SQL; a test of the store ties
// the two together.
func (s Status) Occupies() bool {
	switch s {
	case StatusHeld, StatusConfirmed, StatusArrived, StatusCompleted, StatusNoShow:
		return true
	}
	return false
}

// VisitStep is what a reception action does to an appointment.
type VisitStep int

// The outcomes of a reception action.
const (
	// VisitApply: make the transition.
	VisitApply VisitStep = iota
	// VisitAnswer: the appointment is in the target status already; answer
	// with it and change nothing (a retry with a new key is harmless).
	VisitAnswer
	// VisitTooEarly: the visit's day has not come in the clinic's zone.
	VisitTooEarly
	// VisitOver: the visit's day has passed in the clinic's zone.
	VisitOver
	// VisitRefuse: the status does not allow it (held, cancelled, expired,
	// a no-show already marked, or completed before an arrival).
	VisitRefuse
)

// ArriveFacts are what an arrival decides on, read under the appointment's lock.
type ArriveFacts struct {
	Status Status
	// Day is the slot's day and Today the date now, both in the clinic's zone.
	Day, Today Date
}

// DecideArrive decides marking a patient arrived: a confirmed appointment on
// its own day (the clinic's date). A patient late past the slot's end is
// still marked arrived as long as the no-show job has not marked them:
// whichever of the two locks the appointment first decides, and the other
// finds the status changed (a late arrival after the no-show is refused).
func DecideArrive(f ArriveFacts) VisitStep {
	switch f.Status {
	case StatusArrived:
		return VisitAnswer
	case StatusConfirmed:
	default:
		return VisitRefuse
	}
	switch {
	case f.Today.Before(f.Day):
		return VisitTooEarly
	case f.Day.Before(f.Today):
		return VisitOver
	}
	return VisitApply
}

// DecideComplete decides marking a visit completed: only a patient who
// arrived is seen; marking a completed visit again changes nothing.
func DecideComplete(s Status) VisitStep {
	switch s {
	case StatusCompleted:
		return VisitAnswer
	case StatusArrived:
		return VisitApply
	}
	return VisitRefuse
}

// NoShowAt is the instant from which a confirmed patient who has not
// arrived is a no-show: the slot's end plus the grace period.
func NoShowAt(endsAt time.Time, grace time.Duration) time.Time { return endsAt.Add(grace) }

// DecideNoShow reports whether the no-show job marks an appointment in
// status s whose slot ends at endsAt, at the job's instant now: only a
// confirmed one (not arrived, not cancelled, not marked already) past its
// grace period.
func DecideNoShow(s Status, endsAt, now time.Time, grace time.Duration) bool {
	return s == StatusConfirmed && !now.Before(NoShowAt(endsAt, grace))
}

// NoShowCharge is what a no-show keeps of the payment: a paid appointment is
// not refunded (the slot's time was kept for the patient and cannot be sold
// again), so its price stays charged; an appointment without a payment (its
// doctor needs no prepayment) owes nothing: no money is asked for after the
// fact. AmountCents is 0 when the price is not known (a prepaid appointment
// of a doctor without a price, paid at the desk).
type NoShowCharge struct {
	Charged     bool   `json:"charged"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency,omitempty"`
	PaymentRef  string `json:"payment_ref,omitempty"`
	Reason      string `json:"reason"`
}

// ChargeOnNoShow decides what a no-show of a keeps.
func ChargeOnNoShow(a Appointment) NoShowCharge {
	c := NoShowCharge{Reason: "no_show"}
	if a.PaymentRef == "" {
		return c
	}
	c.Charged, c.PaymentRef, c.Currency = true, a.PaymentRef, a.Currency
	if a.PriceCents != nil {
		c.AmountCents = *a.PriceCents
	}
	return c
}

// NoShowEvent is the data of an appointment.no_show event: the appointment
// as every appointment event carries it, with what stays charged.
type NoShowEvent struct {
	Appointment
	Charge NoShowCharge `json:"charge"`
}

// DayListStatuses are the statuses the reception's day list shows: the
// appointments the patients are expected or seen for.
var DayListStatuses = []Status{StatusConfirmed, StatusArrived, StatusCompleted, StatusNoShow}
