package appointment

import (
	"testing"

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
