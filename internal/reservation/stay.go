// Package reservation owns the rules of a hotel stay: the nights a stay
// covers, how overbooking folds into a night's sellable limit, and which
// status transitions a reservation may make. It imports only the standard
// library; the stores enforce these rules inside their transactions.
package reservation

import (
	"fmt"
	"time"
)

// DateLayout is the wire format of a date.
const DateLayout = "2006-01-02"

// Limits of what a client may ask for.
const (
	// MaxStayNights is the longest stay one reservation may cover.
	MaxStayNights = 30
	// SaleWindowDays is how far ahead nights are sold.
	SaleWindowDays = 366
	// MaxQuantity is the most rooms one reservation may take.
	MaxQuantity = 50
	// MaxInventoryRangeDays bounds one inventory update.
	MaxInventoryRangeDays = 731
)

// Date is a calendar day without a time zone, kept as midnight UTC.
type Date struct{ t time.Time }

// ParseDate parses a strict YYYY-MM-DD date.
func ParseDate(s string) (Date, error) {
	if len(s) != len(DateLayout) {
		return Date{}, fmt.Errorf("want a date as YYYY-MM-DD")
	}
	t, err := time.Parse(DateLayout, s)
	if err != nil {
		return Date{}, fmt.Errorf("want a date as YYYY-MM-DD")
	}
	return Date{t}, nil
}

// DateOf returns the calendar day of t in t's location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{time.Date(y, m, d, 0, 0, 0, 0, time.UTC)}
}

// Time returns the date as midnight UTC.
func (d Date) Time() time.Time { return d.t }

// String formats the date as YYYY-MM-DD.
func (d Date) String() string { return d.t.Format(DateLayout) }

// AddDays returns the date n days later.
func (d Date) AddDays(n int) Date { return Date{d.t.AddDate(0, 0, n)} }

// Before reports whether d is before e.
func (d Date) Before(e Date) bool { return d.t.Before(e.t) }

// IsZero reports whether d is unset.
func (d Date) IsZero() bool { return d.t.IsZero() }

// DaysUntil returns the number of days from d to e.
func (d Date) DaysUntil(e Date) int { return int(e.t.Sub(d.t).Hours() / 24) }

// Stay is the half-open range of nights [CheckIn, CheckOut).
type Stay struct {
	CheckIn, CheckOut Date
}

// Nights returns the number of nights of the stay.
func (s Stay) Nights() int { return s.CheckIn.DaysUntil(s.CheckOut) }

// Dates returns every night of the stay in ascending order — the order in
// which a transaction locks them.
func (s Stay) Dates() []Date {
	n := s.Nights()
	out := make([]Date, 0, max(n, 0))
	for i := range n {
		out = append(out, s.CheckIn.AddDays(i))
	}
	return out
}

// StayError says which date of a stay is wrong and why; Field is
// "check_in" or "check_out", as the API names them.
type StayError struct {
	Field   string
	Message string
}

func (e *StayError) Error() string { return e.Message }

// Validate checks a stay requested on the given day (today in UTC; a day of
// slack allows for hotels west of UTC). A failure is a *StayError.
func (s Stay) Validate(today Date) error {
	switch {
	case !s.CheckIn.Before(s.CheckOut):
		return &StayError{"check_out", "check_out must be after check_in"}
	case s.Nights() > MaxStayNights:
		return &StayError{"check_out", fmt.Sprintf("a stay may cover at most %d nights", MaxStayNights)}
	case s.CheckIn.Before(today.AddDays(-1)):
		return &StayError{"check_in", "check_in is in the past"}
	case today.AddDays(SaleWindowDays).Before(s.CheckOut):
		return &StayError{"check_out", fmt.Sprintf("check_out is beyond the %d-day sale window", SaleWindowDays)}
	}
	return nil
}

// SellLimit folds an overbooking percentage into a night's sellable limit:
// floor(totalRooms * (100 + pct) / 100).
func SellLimit(totalRooms, overbookingPct int) int {
	return totalRooms * (100 + overbookingPct) / 100
}
