package reservation

import "time"

// The statuses a stay reaches at the front desk (issue: the stay end to end).
const (
	// StatusCheckedIn: the guest arrived and has a room for every night.
	StatusCheckedIn Status = "checked_in"
	// StatusCheckedOut: the guest left; nights after an early departure went
	// back to inventory.
	StatusCheckedOut Status = "checked_out"
	// StatusNoShow: the guest never arrived; the first night stays charged,
	// the later nights went back to inventory.
	StatusNoShow Status = "no_show"
)

// Event types of the stay.
const (
	EventCheckedIn  = "reservation.checked_in"
	EventCheckedOut = "reservation.checked_out"
	EventNoShow     = "reservation.no_show"
)

// Occupies reports whether a reservation in status s still counts in the
// nights it occupies, [check_in, released_from or check_out): a live one,
// a stay in progress or over, a no-show's charged first night, and a stay
// being walked (until the sister hotel has taken the guest).
func (s Status) Occupies() bool {
	switch s {
	case StatusHeld, StatusConfirmed, StatusCheckedIn, StatusCheckedOut, StatusNoShow, StatusWalking:
		return true
	}
	return false
}

// Room is a physical room of a room type: what check-in assigns.
type Room struct {
	ID         string       `json:"room_id"`
	HotelID    string       `json:"hotel_id"`
	RoomTypeID string       `json:"room_type_id"`
	Number     string       `json:"number"`
	Floor      int          `json:"floor"`
	Features   []string     `json:"features"`
	OutOfOrder []OutOfOrder `json:"out_of_order"`
	CreatedAt  time.Time    `json:"created_at"`
}

// OutOfOrder is a period of nights [from, to) a room cannot be sold.
type OutOfOrder struct {
	From   Date   `json:"from"`
	To     Date   `json:"to"`
	Reason string `json:"reason"`
}

// AssignedRoom is a room a stay holds for every night it occupies.
type AssignedRoom struct {
	RoomID string `json:"room_id"`
	Number string `json:"number"`
}

// OutOfOrderPeriods folds a room's out-of-order nights, ascending, into
// periods of consecutive nights with one reason.
func OutOfOrderPeriods(nights []Date, reasons []string) []OutOfOrder {
	out := []OutOfOrder{}
	for i, n := range nights {
		if k := len(out) - 1; k >= 0 && out[k].To.String() == n.String() && out[k].Reason == reasons[i] {
			out[k].To = n.AddDays(1)
			continue
		}
		out = append(out, OutOfOrder{From: n, To: n.AddDays(1), Reason: reasons[i]})
	}
	return out
}

// CheckInAction is what a check-in does to a reservation.
type CheckInAction int

// The outcomes of a check-in request.
const (
	// CheckInNow: assign rooms and mark the stay checked in.
	CheckInNow CheckInAction = iota
	// CheckInTooEarly: the arrival day has not come in the hotel's time zone.
	CheckInTooEarly
	// CheckInOver: the stay's last night has passed.
	CheckInOver
	// CheckInRefuse: the status does not allow it (held, cancelled, a
	// no-show already marked, checked in or out already).
	CheckInRefuse
)

// OnCheckIn decides a check-in of a reservation in status s for stay, on
// the hotel's local date today. A late arrival (the day after, before the
// no-show job marked it) is still checked in: its first night was charged
// and kept for it.
func OnCheckIn(s Status, stay Stay, today Date) CheckInAction {
	switch {
	case s != StatusConfirmed:
		return CheckInRefuse
	case today.Before(stay.CheckIn):
		return CheckInTooEarly
	case !today.Before(stay.CheckOut):
		return CheckInOver
	}
	return CheckInNow
}

// ReleaseOnDeparture returns the first night a departure on the hotel's
// local date today gives back: today itself when the guest leaves before
// the stay's end (an early departure), the check-out date when nothing is
// given back, never before the first night.
func ReleaseOnDeparture(stay Stay, today Date) Date {
	switch {
	case today.Before(stay.CheckIn):
		return stay.CheckIn
	case today.Before(stay.CheckOut):
		return today
	}
	return stay.CheckOut
}

// NoShowAt is the instant after which a confirmed guest who has not checked
// in is a no-show: cutoff (time of day) on the day after arrival, in the
// hotel's zone.
func NoShowAt(checkIn Date, loc *time.Location, cutoff time.Duration) time.Time {
	d := checkIn.AddDays(1).Time()
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc).Add(cutoff)
}

// LocalDate is the date at instant now in the hotel's zone.
func LocalDate(now time.Time, loc *time.Location) Date {
	return DateOf(now.In(loc))
}

// FirstNightCents is what a no-show is charged: the first night of every
// room, a stay's price being the same every night.
func FirstNightCents(r Reservation) int64 {
	n := r.Stay().Nights()
	if n <= 0 {
		return 0
	}
	return r.TotalPriceCents / int64(n)
}
