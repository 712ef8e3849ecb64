package reservation

import (
	"errors"
	"testing"
)

func mustDate(t *testing.T, s string) Date {
	t.Helper()
	d, err := ParseDate(s)
	if err != nil {
		t.Fatalf("ParseDate(%q): %v", s, err)
	}
	return d
}

func TestParseDate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"2027-01-31", true},
		{"2028-02-29", true},
		{"2027-02-29", false},
		{"2027-1-31", false},
		{"2027-01-31T00:00:00Z", false},
		{"", false},
		{"31/01/2027", false},
		{"2027-13-01", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDate(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseDate(%q) err=%v, want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}

func TestStayNightsHalfOpen(t *testing.T) {
	t.Parallel()
	s := Stay{mustDate(t, "2027-03-10"), mustDate(t, "2027-03-13")}
	got := s.Dates()
	want := []string{"2027-03-10", "2027-03-11", "2027-03-12"}
	if len(got) != len(want) {
		t.Fatalf("got %d nights, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("night %d = %s, want %s", i, got[i], want[i])
		}
	}
	// Across a DST change and a month end, a night is still one day.
	s = Stay{mustDate(t, "2027-03-27"), mustDate(t, "2027-04-02")}
	if s.Nights() != 6 {
		t.Errorf("nights over DST/month end = %d, want 6", s.Nights())
	}
}

func TestStayValidate(t *testing.T) {
	t.Parallel()
	today := mustDate(t, "2027-01-10")
	for _, tc := range []struct {
		name    string
		in, out string
		field   string // "" when the stay is valid
	}{
		{"one night", "2027-01-10", "2027-01-11", ""},
		{"yesterday allowed for western zones", "2027-01-09", "2027-01-11", ""},
		{"past", "2027-01-08", "2027-01-11", "check_in"},
		{"zero nights", "2027-01-12", "2027-01-12", "check_out"},
		{"reversed", "2027-01-13", "2027-01-12", "check_out"},
		{"too long", "2027-02-01", "2027-03-05", "check_out"},
		{"max length", "2027-02-01", "2027-03-03", ""},
		{"beyond sale window", "2028-01-20", "2028-01-22", "check_out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Stay{mustDate(t, tc.in), mustDate(t, tc.out)}.Validate(today)
			var se *StayError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate = %v, want ok", err)
			case tc.field != "" && (!errors.As(err, &se) || se.Field != tc.field):
				t.Fatalf("Validate = %#v, want a StayError on %s", err, tc.field)
			}
		})
	}
}

func TestSellLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ total, pct, want int }{
		{10, 0, 10}, {10, 10, 11}, {10, 25, 12}, {3, 25, 3}, {4, 25, 5}, {0, 25, 0}, {99, 1, 99}, {100, 1, 101},
	} {
		if got := SellLimit(tc.total, tc.pct); got != tc.want {
			t.Errorf("SellLimit(%d, %d) = %d, want %d", tc.total, tc.pct, got, tc.want)
		}
	}
}

func TestOnConfirm(t *testing.T) {
	t.Parallel()
	for s, want := range map[Status]ConfirmAction{
		StatusHeld: ConfirmNow, StatusConfirmed: ConfirmAlready,
		StatusExpired: ConfirmRetake, StatusCancelled: ConfirmRefuse,
	} {
		if got := OnConfirm(s); got != want {
			t.Errorf("OnConfirm(%s) = %v, want %v", s, got, want)
		}
	}
	if CanCancel(StatusExpired) || CanCancel(StatusCancelled) || !CanCancel(StatusHeld) || !CanCancel(StatusConfirmed) {
		t.Error("CanCancel must allow exactly the live statuses")
	}
}

func TestCancelOnPaymentFailure(t *testing.T) {
	t.Parallel()
	for s, want := range map[Status]bool{StatusHeld: true, StatusConfirmed: false, StatusCancelled: false, StatusExpired: false} {
		if got := CancelOnPaymentFailure(s); got != want {
			t.Errorf("CancelOnPaymentFailure(%s) = %v, want %v", s, got, want)
		}
	}
}
