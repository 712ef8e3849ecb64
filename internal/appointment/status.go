package appointment

import "github.com/berthhq/berth/internal/reservation"

// ConfirmAction is what a confirm does to an appointment in a given state:
// the same transitions as a hotel reservation's (reservation.OnConfirm),
// with a slot where a reservation has nights.
type ConfirmAction = reservation.ConfirmAction

// The outcomes of a confirm request.
const (
	// ConfirmNow: the appointment is held — even if its hold lapsed; it is
	// confirmed if it still occupies its slot (nobody took it meanwhile).
	ConfirmNow = reservation.ConfirmNow
	// ConfirmAlready: confirmed already; answer with it, change nothing.
	ConfirmAlready = reservation.ConfirmAlready
	// ConfirmRetake: someone else's hold gave it up; try to take the slot
	// again, or request a refund.
	ConfirmRetake = reservation.ConfirmRetake
	// ConfirmRefuse: the transition is not allowed (cancelled, no-show).
	ConfirmRefuse = reservation.ConfirmRefuse
)

// OnConfirm decides what a confirm does: reservation.OnConfirm for the
// states an appointment shares with a reservation (held, confirmed,
// expired, cancelled, spelt alike), and a refusal for a no-show.
func OnConfirm(s Status) ConfirmAction {
	if s == StatusNoShow {
		return ConfirmRefuse
	}
	return reservation.OnConfirm(reservation.Status(s))
}

// CancelOnPaymentFailure is reservation.CancelOnPaymentFailure for an
// appointment: only a hold is released by a failed payment.
func CancelOnPaymentFailure(s Status) bool {
	return reservation.CancelOnPaymentFailure(reservation.Status(s))
}

// CanCancel reports whether an appointment in status s may be cancelled.
func CanCancel(s Status) bool { return s.Live() }

// CanReschedule reports whether an appointment in status s may move.
func CanReschedule(s Status) bool { return s.Live() }

// Takeable reports whether a slot in status st is open for a new holder;
// lapsed tells whether its hold (if held) expired by database time. The
// store expresses the same rule in its conditional UPDATE (takeableSQL); a
// test of the store holds the two together.
func Takeable(st SlotStatus, lapsed bool) bool {
	return st == SlotOpen || (st == SlotHeld && lapsed)
}

// Shown is the status a client sees: a lapsed hold shows as open.
func Shown(st SlotStatus, lapsed bool) SlotStatus {
	if st == SlotHeld && lapsed {
		return SlotOpen
	}
	return st
}

// CanBlock reports whether staff may block a slot in status st.
func CanBlock(st SlotStatus, lapsed bool) bool { return Takeable(st, lapsed) || st == SlotBlocked }

// ConfirmStep is what confirming an appointment does, decided from what
// the store found under its locks (ConfirmFacts).
type ConfirmStep int

// The steps of a confirm.
const (
	// ConfirmAnswer: confirmed already; answer with it, change nothing.
	ConfirmAnswer ConfirmStep = iota
	// ConfirmInvalid: the appointment cannot be confirmed (cancelled,
	// no-show): 409 invalid_state, nothing changes.
	ConfirmInvalid
	// ConfirmBook: the appointment still holds its slot (even if its hold
	// lapsed: nobody took the slot meanwhile); book the slot.
	ConfirmBook
	// ConfirmTakeAgain: the lapsed hold was given up; take the slot again
	// if it is still takeable, else lose.
	ConfirmTakeAgain
	// ConfirmLose: the slot went to someone else, it is over, or the guest
	// booked another slot of this doctor that day: the appointment expires
	// and the payment is refunded (409 hold_expired, committed).
	ConfirmLose
)

// ConfirmFacts are what a confirm decides on, read under the locks of the
// lock order (guest days, the slot, the appointment).
type ConfirmFacts struct {
	Status Status // the appointment's status
	// HoldsSlot: its slot is held and names this appointment.
	HoldsSlot bool
	// Started: the slot has begun (database time).
	Started bool
	// OtherLiveThatDay: the guest has another live appointment with this
	// doctor on the slot's day — one appointment per doctor per day.
	OtherLiveThatDay bool
}

// DecideConfirm is the clinic confirm decision; the store executes it.
func DecideConfirm(f ConfirmFacts) ConfirmStep {
	switch OnConfirm(f.Status) {
	case ConfirmAlready:
		return ConfirmAnswer
	case ConfirmRefuse:
		return ConfirmInvalid
	case ConfirmNow:
		if f.HoldsSlot && !f.Started && !f.OtherLiveThatDay {
			return ConfirmBook
		}
		return ConfirmLose
	default: // ConfirmRetake
		if f.Started || f.OtherLiveThatDay {
			return ConfirmLose
		}
		return ConfirmTakeAgain
	}
}

// DayTaken refuses an appointment that would give a guest a second one with
// the same doctor on one clinic-local day.
type DayTaken struct{ Day Date }

func (e DayTaken) Error() string {
	return "the guest already has an appointment with this doctor on " + e.Day.String() + "; one per doctor per day"
}

// OnePerDoctorPerDay decides whether the guest may claim a slot of a doctor
// on day (a new hold, or a reschedule onto another day): not when another of
// their appointments with that doctor on that day still Counts. The store
// counts those under the guest-day lock (countsSQL, tied to Counts by a
// test) and executes this verdict.
func OnePerDoctorPerDay(day Date, anotherCounts bool) error {
	if anotherCounts {
		return DayTaken{Day: day}
	}
	return nil
}
