package reservation

import (
	"testing"
	"time"
)

func TestOnCheckIn(t *testing.T) {
	t.Parallel()
	stay := Stay{mustDate(t, "2027-05-10"), mustDate(t, "2027-05-13")}
	for _, tc := range []struct {
		status Status
		today  string
		want   CheckInAction
	}{
		{StatusConfirmed, "2027-05-10", CheckInNow},
		{StatusConfirmed, "2027-05-11", CheckInNow}, // late, before the no-show job
		{StatusConfirmed, "2027-05-12", CheckInNow},
		{StatusConfirmed, "2027-05-09", CheckInTooEarly},
		{StatusConfirmed, "2027-05-13", CheckInOver},
		{StatusHeld, "2027-05-10", CheckInRefuse},
		{StatusNoShow, "2027-05-11", CheckInRefuse},
		{StatusCheckedIn, "2027-05-10", CheckInRefuse},
		{StatusCancelled, "2027-05-10", CheckInRefuse},
	} {
		if got := OnCheckIn(tc.status, stay, mustDate(t, tc.today)); got != tc.want {
			t.Errorf("OnCheckIn(%s, %s) = %d, want %d", tc.status, tc.today, got, tc.want)
		}
	}
}

func TestReleaseOnDeparture(t *testing.T) {
	t.Parallel()
	stay := Stay{mustDate(t, "2027-05-10"), mustDate(t, "2027-05-13")}
	for today, want := range map[string]string{
		"2027-05-09": "2027-05-10", "2027-05-10": "2027-05-10", "2027-05-11": "2027-05-11",
		"2027-05-12": "2027-05-12", "2027-05-13": "2027-05-13", "2027-05-20": "2027-05-13",
	} {
		if got := ReleaseOnDeparture(stay, mustDate(t, today)).String(); got != want {
			t.Errorf("ReleaseOnDeparture(%s) = %s, want %s", today, got, want)
		}
	}
}

func TestNoShowAtIsLocal(t *testing.T) {
	t.Parallel()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	got := NoShowAt(mustDate(t, "2027-05-10"), tokyo, 12*time.Hour)
	if want := time.Date(2027, 5, 11, 3, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("NoShowAt = %s, want %s (noon in Tokyo the day after)", got.UTC(), want)
	}
	if d := LocalDate(time.Date(2027, 5, 10, 20, 0, 0, 0, time.UTC), tokyo).String(); d != "2027-05-11" {
		t.Fatalf("LocalDate = %s, want 2027-05-11", d)
	}
}

func TestOutOfOrderPeriods(t *testing.T) {
	t.Parallel()
	n := func(s string) Date { return mustDate(t, s) }
	got := OutOfOrderPeriods([]Date{n("2027-01-01"), n("2027-01-02"), n("2027-01-04"), n("2027-01-05")},
		[]string{"a", "a", "a", "b"})
	want := []string{"2027-01-01..2027-01-03 a", "2027-01-04..2027-01-05 a", "2027-01-05..2027-01-06 b"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i, p := range got {
		if s := p.From.String() + ".." + p.To.String() + " " + p.Reason; s != want[i] {
			t.Errorf("period %d = %s, want %s", i, s, want[i])
		}
	}
}

func TestFirstNightCents(t *testing.T) {
	t.Parallel()
	r := Reservation{CheckIn: mustDate(t, "2027-05-10"), CheckOut: mustDate(t, "2027-05-13"), TotalPriceCents: 60000}
	if got := FirstNightCents(r); got != 20000 {
		t.Fatalf("FirstNightCents = %d, want 20000", got)
	}
}
