package appointment

import (
	"testing"
	"time"
)

func TestDecideArrive(t *testing.T) {
	t.Parallel()
	day := mustDate(t, "2027-03-10")
	for _, tc := range []struct {
		name  string
		s     Status
		today Date
		want  VisitStep
	}{
		{"confirmed, on the day", StatusConfirmed, day, VisitApply},
		{"confirmed, the day before", StatusConfirmed, day.AddDays(-1), VisitTooEarly},
		{"confirmed, the day after", StatusConfirmed, day.AddDays(1), VisitOver},
		{"arrived already", StatusArrived, day, VisitAnswer},
		{"arrived already, answered the day after too", StatusArrived, day.AddDays(1), VisitAnswer},
		{"held (not paid)", StatusHeld, day, VisitRefuse},
		{"cancelled", StatusCancelled, day, VisitRefuse},
		{"expired", StatusExpired, day, VisitRefuse},
		{"no-show marked first: the late arrival loses", StatusNoShow, day, VisitRefuse},
		{"completed", StatusCompleted, day, VisitRefuse},
		{"unknown", Status("bogus"), day, VisitRefuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := DecideArrive(ArriveFacts{Status: tc.s, Day: day, Today: tc.today}); got != tc.want {
				t.Fatalf("DecideArrive(%s, today %s) = %d, want %d", tc.s, tc.today, got, tc.want)
			}
		})
	}
}

func TestDecideComplete(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    Status
		want VisitStep
	}{
		{StatusArrived, VisitApply},
		{StatusCompleted, VisitAnswer},
		{StatusConfirmed, VisitRefuse}, // arrive first
		{StatusHeld, VisitRefuse},
		{StatusCancelled, VisitRefuse},
		{StatusExpired, VisitRefuse},
		{StatusNoShow, VisitRefuse},
	} {
		if got := DecideComplete(tc.s); got != tc.want {
			t.Errorf("DecideComplete(%s) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestDecideNoShow(t *testing.T) {
	t.Parallel()
	end := time.Date(2027, 3, 10, 9, 30, 0, 0, time.UTC)
	grace := 15 * time.Minute
	for _, tc := range []struct {
		name string
		s    Status
		now  time.Time
		want bool
	}{
		{"confirmed, within the grace period", StatusConfirmed, end.Add(grace - time.Second), false},
		{"confirmed, at the end of the grace period", StatusConfirmed, end.Add(grace), true},
		{"confirmed, long after", StatusConfirmed, end.Add(48 * time.Hour), true},
		{"confirmed, before the slot ended", StatusConfirmed, end.Add(-time.Minute), false},
		{"arrived: never a no-show", StatusArrived, end.Add(time.Hour), false},
		{"completed", StatusCompleted, end.Add(time.Hour), false},
		{"marked already: a second run changes nothing", StatusNoShow, end.Add(time.Hour), false},
		{"held", StatusHeld, end.Add(time.Hour), false},
		{"cancelled", StatusCancelled, end.Add(time.Hour), false},
		{"expired", StatusExpired, end.Add(time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := DecideNoShow(tc.s, end, tc.now, grace); got != tc.want {
				t.Fatalf("DecideNoShow(%s, now %s) = %v, want %v", tc.s, tc.now, got, tc.want)
			}
		})
	}
}

func TestChargeOnNoShow(t *testing.T) {
	t.Parallel()
	price := int64(4500)
	for _, tc := range []struct {
		name string
		a    Appointment
		want NoShowCharge
	}{
		{"paid online: the price stays charged", Appointment{PaymentRef: "pi_1", PriceCents: &price, Currency: "EUR"},
			NoShowCharge{Charged: true, AmountCents: 4500, Currency: "EUR", PaymentRef: "pi_1", Reason: "no_show"}},
		{"paid at the desk without a price: kept, amount unknown", Appointment{PaymentRef: "desk-7"},
			NoShowCharge{Charged: true, PaymentRef: "desk-7", Reason: "no_show"}},
		{"no prepayment: nothing is charged", Appointment{},
			NoShowCharge{Reason: "no_show"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := ChargeOnNoShow(tc.a); got != tc.want {
				t.Fatalf("ChargeOnNoShow = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Occupies is Live plus the three ends of a visit: none of them gives the
// slot back, and only a cancelled or expired appointment leaves it.
func TestOccupies(t *testing.T) {
	t.Parallel()
	for s, want := range map[Status]bool{
		StatusHeld: true, StatusConfirmed: true, StatusArrived: true, StatusCompleted: true, StatusNoShow: true,
		StatusCancelled: false, StatusExpired: false,
	} {
		if got := s.Occupies(); got != want {
			t.Errorf("%s.Occupies() = %v, want %v", s, got, want)
		}
		if s.Live() && !s.Occupies() {
			t.Errorf("%s is live but does not occupy its slot", s)
		}
	}
	for _, s := range []Status{StatusArrived, StatusCompleted, StatusNoShow} {
		if s.Live() || CanCancel(s) || CanReschedule(s) {
			t.Errorf("%s may still be cancelled or moved", s)
		}
		if OnConfirm(s) != ConfirmRefuse {
			t.Errorf("%s may be confirmed again", s)
		}
	}
}
