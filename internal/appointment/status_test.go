package appointment

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/reservation"
)

// The confirm transitions of an appointment are a reservation's: every
// status an appointment shares with a reservation is spelt alike and
// decides alike, and a no-show is refused.
func TestOnConfirm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    Status
		want ConfirmAction
	}{
		{StatusHeld, ConfirmNow},
		{StatusConfirmed, ConfirmAlready},
		{StatusExpired, ConfirmRetake},
		{StatusCancelled, ConfirmRefuse},
		{StatusNoShow, ConfirmRefuse},
		{Status("bogus"), ConfirmRefuse},
	} {
		if got := OnConfirm(tc.s); got != tc.want {
			t.Errorf("OnConfirm(%s) = %d, want %d", tc.s, got, tc.want)
		}
	}
	for a, r := range map[Status]reservation.Status{
		StatusHeld: reservation.StatusHeld, StatusConfirmed: reservation.StatusConfirmed,
		StatusExpired: reservation.StatusExpired, StatusCancelled: reservation.StatusCancelled,
	} {
		if string(a) != string(r) {
			t.Errorf("appointment status %q is spelt %q for a reservation", a, r)
		}
	}
}

func TestDecideConfirm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    ConfirmFacts
		want ConfirmStep
	}{
		{"confirmed already", ConfirmFacts{Status: StatusConfirmed}, ConfirmAnswer},
		{"confirmed already, even on a day now busy", ConfirmFacts{Status: StatusConfirmed, OtherLiveThatDay: true}, ConfirmAnswer},
		{"cancelled", ConfirmFacts{Status: StatusCancelled, HoldsSlot: true}, ConfirmInvalid},
		{"no-show", ConfirmFacts{Status: StatusNoShow}, ConfirmInvalid},
		{"held and holding its slot", ConfirmFacts{Status: StatusHeld, HoldsSlot: true}, ConfirmBook},
		{"held, slot taken by another", ConfirmFacts{Status: StatusHeld}, ConfirmLose},
		{"held, slot over", ConfirmFacts{Status: StatusHeld, HoldsSlot: true, Started: true}, ConfirmLose},
		{"held, another appointment that day", ConfirmFacts{Status: StatusHeld, HoldsSlot: true, OtherLiveThatDay: true}, ConfirmLose},
		{"expired: take the slot again", ConfirmFacts{Status: StatusExpired}, ConfirmTakeAgain},
		{"expired, slot over", ConfirmFacts{Status: StatusExpired, Started: true}, ConfirmLose},
		{"expired, another appointment that day", ConfirmFacts{Status: StatusExpired, OtherLiveThatDay: true}, ConfirmLose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := DecideConfirm(tc.f); got != tc.want {
				t.Fatalf("DecideConfirm(%+v) = %d, want %d", tc.f, got, tc.want)
			}
		})
	}
}

// Live and Counts differ only for a lapsed hold: it still claims its slot
// (it may be confirmed while nobody took it) but no longer stops the guest
// from booking another slot of that doctor that day.
func TestLiveAndCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s            Status
		lapsed       bool
		live, counts bool
	}{
		{StatusHeld, false, true, true},
		{StatusHeld, true, true, false},
		{StatusConfirmed, false, true, true},
		{StatusConfirmed, true, true, true},
		{StatusCancelled, false, false, false},
		{StatusExpired, false, false, false},
		{StatusNoShow, false, false, false},
	} {
		if tc.s.Live() != tc.live || tc.s.Counts(tc.lapsed) != tc.counts {
			t.Errorf("%s lapsed=%v: Live %v Counts %v, want %v %v", tc.s, tc.lapsed, tc.s.Live(), tc.s.Counts(tc.lapsed), tc.live, tc.counts)
		}
	}
}

func TestAppointmentCancelOnPaymentFailure(t *testing.T) {
	t.Parallel()
	for s, want := range map[Status]bool{StatusHeld: true, StatusConfirmed: false, StatusCancelled: false, StatusExpired: false, StatusNoShow: false} {
		if got := CancelOnPaymentFailure(s); got != want {
			t.Errorf("CancelOnPaymentFailure(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestOnePerDoctorPerDay(t *testing.T) {
	t.Parallel()
	day := DateOf(time.Date(2027, 3, 14, 0, 0, 0, 0, time.UTC))
	if err := OnePerDoctorPerDay(day, false); err != nil {
		t.Errorf("no other appointment that day: %v, want nil", err)
	}
	err := OnePerDoctorPerDay(day, true)
	var taken DayTaken
	if !errors.As(err, &taken) || taken.Day != day {
		t.Fatalf("another appointment counts that day: %v, want DayTaken{%s}", err, day)
	}
	if !strings.Contains(err.Error(), "2027-03-14") {
		t.Errorf("the refusal %q does not name the day", err)
	}
}
