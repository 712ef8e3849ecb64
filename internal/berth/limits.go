package berth

import "fmt"

// GuestLimits bound what one guest may hold at once in one partition, so
// that nobody can take a hotel's or a clinic's inventory out of sale by
// holding it without paying. Both apply per (partition, guest): a partition
// decides alone, in its own transaction, never by asking another region.
type GuestLimits struct {
	// Holds is the most live holds a guest may have in one partition.
	Holds int
	// Quantity is the most units those holds may take together: rooms of
	// a hotel (the sum of their quantities), appointments of a clinic.
	Quantity int
}

// DefaultGuestLimits are the limits when none are configured. The quantity
// cap is the largest quantity one reservation may ask for, so a single valid
// request is never refused by default.
var DefaultGuestLimits = GuestLimits{Holds: 5, Quantity: 50}

// Validate reports a limit that would refuse every hold.
func (l GuestLimits) Validate() error {
	if l.Holds < 1 {
		return fmt.Errorf("holds per guest: at least 1, got %d", l.Holds)
	}
	if l.Quantity < 1 {
		return fmt.Errorf("quantity per guest: at least 1, got %d", l.Quantity)
	}
	return nil
}

// The names of the limits, as the problem document's `limit` member says
// which one a request hit.
const (
	LimitHolds    = "holds_per_guest"
	LimitQuantity = "quantity_per_guest"
)

// Which names the limit that one more live unit would pass, or "" when
// neither: the guest has holds live holds and quantity live units, and asks
// for n more units, as a hold when isHold (a booking confirmed at once, as a
// clinic's without prepayment, is no hold and counts only towards the
// quantity).
func (l GuestLimits) Which(holds, quantity, n int, isHold bool) string {
	switch {
	case isHold && holds+1 > l.Holds:
		return LimitHolds
	case quantity+n > l.Quantity:
		return LimitQuantity
	}
	return ""
}

// LimitExceeded is the 409 answer of a hold past a limit: the body names the
// limit and its maximum so a client can tell the guest what to do.
func (l GuestLimits) LimitExceeded(which string) *Error {
	max := l.Holds
	detail := fmt.Sprintf("the guest already has %d live hold(s) here, the most allowed; confirm or cancel one first", l.Holds)
	if which == LimitQuantity {
		max = l.Quantity
		detail = fmt.Sprintf("the guest's live holds here would take more than %d unit(s) together", l.Quantity)
	}
	return &Error{Code: CodeLimitExceeded, Detail: detail, Extra: map[string]any{"limit": which, "max": max}}
}
