package reservation

// Status is the life-cycle state of a reservation.
type Status string

// The statuses of a hotel reservation.
const (
	StatusHeld      Status = "held"
	StatusConfirmed Status = "confirmed"
	StatusCancelled Status = "cancelled"
	StatusExpired   Status = "expired"
)

// Live reports whether a reservation in status s takes inventory.
func (s Status) Live() bool { return s == StatusHeld || s == StatusConfirmed }

// ConfirmAction is what a confirm does to a reservation (or, with a slot
// for its nights, an appointment: appointment.OnConfirm) in a given state.
type ConfirmAction int

// The outcomes of a confirm request.
const (
	// ConfirmNow: the reservation still holds its nights; mark it confirmed.
	ConfirmNow ConfirmAction = iota
	// ConfirmAlready: it is confirmed already; answer with it, change nothing.
	ConfirmAlready
	// ConfirmRetake: the hold lapsed and its nights were returned; try to
	// take every night again, or request a refund.
	ConfirmRetake
	// ConfirmRefuse: the transition is not allowed (cancelled).
	ConfirmRefuse
)

// OnConfirm decides what a confirm does. A held reservation whose hold has
// lapsed but which the sweeper has not yet expired still owns its nights, so
// a late payment confirms it at once.
func OnConfirm(s Status) ConfirmAction {
	switch s {
	case StatusHeld:
		return ConfirmNow
	case StatusConfirmed:
		return ConfirmAlready
	case StatusExpired:
		return ConfirmRetake
	}
	return ConfirmRefuse
}

// CanCancel reports whether a reservation in status s may be cancelled; only
// a live reservation has nights to give back.
func CanCancel(s Status) bool { return s.Live() }

// CancelOnPaymentFailure reports whether a failed payment cancels a
// reservation (or an appointment) in status s: only a hold is released. A
// confirmed booking is not undone by a late failure notice, and anything
// already over stays as it is; either way the notice is answered, not
// refused, so the provider stops resending it.
func CancelOnPaymentFailure(s Status) bool { return s == StatusHeld }

// Event types written to the outbox.
const (
	EventHeld            = "reservation.held"
	EventConfirmed       = "reservation.confirmed"
	EventCancelled       = "reservation.cancelled"
	EventExpired         = "reservation.expired"
	EventRefundRequested = "refund_requested"
)
