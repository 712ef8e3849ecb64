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

// CanCancel reports whether an appointment in status s may be cancelled.
func CanCancel(s Status) bool { return s.Live() }

// CanReschedule reports whether an appointment in status s may move.
func CanReschedule(s Status) bool { return s.Live() }

// Takeable reports whether a slot in status st is open for a new holder;
// lapsed tells whether its hold (if held) expired by database time. The
// store expresses the same rule in its conditional UPDATE.
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
