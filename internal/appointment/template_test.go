package appointment

import (
	"go/build"
	"strings"
	"testing"
	"time"
)

func mustDate(t *testing.T, s string) Date {
	t.Helper()
	d, err := ParseDate(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseClock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		allowEnd bool
		want     int
		ok       bool
	}{
		{"08:00", false, 480, true},
		{"00:00", false, 0, true},
		{"23:59", false, 1439, true},
		{"24:00", true, 1440, true},
		{"24:00", false, 0, false},
		{"25:00", true, 0, false},
		{"08:60", false, 0, false},
		{"8:00", false, 0, false},
		{"08-00", false, 0, false},
		{"0800", false, 0, false},
		{"", false, 0, false},
		{"ab:cd", false, 0, false},
		{"08:00:00", false, 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseClock(tc.in, tc.allowEnd)
			if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
				t.Fatalf("ParseClock(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestValidateTemplate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		minutes int
		weekly  []Window
		field   string // "" = valid
	}{
		{"ok", 30, []Window{{1, "08:00", "12:00"}, {1, "13:00", "17:00"}, {7, "09:00", "24:00"}}, ""},
		{"slot minutes zero", 0, []Window{{1, "08:00", "12:00"}}, "slot_minutes"},
		{"slot minutes too long", 481, []Window{{1, "08:00", "20:00"}}, "slot_minutes"},
		{"weekday 8", 30, []Window{{8, "08:00", "12:00"}}, "weekly[0].weekday"},
		{"weekday 0", 30, []Window{{0, "08:00", "12:00"}}, "weekly[0].weekday"},
		{"hour 25", 30, []Window{{1, "25:00", "26:00"}}, "weekly[0].start"},
		{"end before start", 30, []Window{{1, "12:00", "08:00"}}, "weekly[0].end"},
		{"shorter than a slot", 60, []Window{{1, "08:00", "08:30"}}, "weekly[0].end"},
		{"overlap", 30, []Window{{2, "08:00", "12:00"}, {2, "11:00", "13:00"}}, "weekly"},
		{"empty", 30, nil, "weekly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := ValidateTemplate(tc.minutes, tc.weekly)
			if tc.field == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.field {
					return
				}
			}
			t.Fatalf("want an error on %s, got %v", tc.field, errs)
		})
	}
}

// checkSlots asserts slots are sorted, distinct, non-overlapping and last
// slotMinutes each.
func checkSlots(t *testing.T, slots []SlotTime, minutes int) {
	t.Helper()
	for i, s := range slots {
		if got := s.End.Sub(s.Start); got != time.Duration(minutes)*time.Minute {
			t.Errorf("slot %s lasts %s", s.Start, got)
		}
		if i > 0 && slots[i-1].End.After(s.Start) {
			t.Errorf("slot %s overlaps %s", s.Start, slots[i-1].Start)
		}
	}
}

func wallTimes(slots []SlotTime, loc *time.Location) []string {
	var out []string
	for _, s := range slots {
		out = append(out, s.Start.In(loc).Format("15:04 MST"))
	}
	return out
}

func TestMaterializeDST(t *testing.T) {
	t.Parallel()
	// Sunday 00:00–05:00 in 30-minute slots covers every transition hour.
	weekly := []Window{{7, "00:00", "05:00"}}
	for _, tc := range []struct {
		zone, day string
		want      []string
	}{
		// Clocks go forward 02:00 → 03:00: no slot at 02:00 or 02:30.
		{"Europe/Berlin", "2027-03-28", []string{"00:00 CET", "00:30 CET", "01:00 CET", "01:30 CET",
			"03:00 CEST", "03:30 CEST", "04:00 CEST", "04:30 CEST"}},
		// Clocks go back 03:00 → 02:00: 02:00 and 02:30 once each (first occurrence).
		{"Europe/Berlin", "2027-10-31", []string{"00:00 CEST", "00:30 CEST", "01:00 CEST", "01:30 CEST",
			"02:00 CEST", "02:30 CEST", "03:00 CET", "03:30 CET", "04:00 CET", "04:30 CET"}},
		{"America/New_York", "2027-03-14", []string{"00:00 EST", "00:30 EST", "01:00 EST", "01:30 EST",
			"03:00 EDT", "03:30 EDT", "04:00 EDT", "04:30 EDT"}},
		{"America/New_York", "2027-11-07", []string{"00:00 EDT", "00:30 EDT", "01:00 EDT", "01:30 EDT",
			"02:00 EST", "02:30 EST", "03:00 EST", "03:30 EST", "04:00 EST", "04:30 EST"}},
	} {
		t.Run(tc.zone+"/"+tc.day, func(t *testing.T) {
			t.Parallel()
			loc := mustLoc(t, tc.zone)
			d := mustDate(t, tc.day)
			slots := Materialize(30, weekly, loc, d, d.AddDays(1))
			got := wallTimes(slots, loc)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("slots\n got %v\nwant %v", got, tc.want)
			}
			checkSlots(t, slots, 30)
			seen := map[time.Time]bool{}
			for _, s := range slots {
				if seen[s.Start] {
					t.Errorf("duplicate instant %s", s.Start)
				}
				seen[s.Start] = true
				if s.LocalDate != d {
					t.Errorf("slot %s on %s, want %s", s.Start, s.LocalDate, d)
				}
				if s.Start.Location() != time.UTC {
					t.Errorf("slot %s not in UTC", s.Start)
				}
			}
		})
	}
}

func TestMaterializeIsDeterministicAndWeekly(t *testing.T) {
	t.Parallel()
	loc := mustLoc(t, "Europe/Berlin")
	weekly := []Window{{1, "08:00", "12:00"}, {3, "14:00", "16:00"}}
	from := mustDate(t, "2027-03-22") // Monday, spans the DST week
	a := Materialize(20, weekly, loc, from, from.AddDays(14))
	b := Materialize(20, weekly, loc, from, from.AddDays(14))
	if len(a) != 2*(12+6) || len(a) != len(b) {
		t.Fatalf("got %d and %d slots, want %d", len(a), len(b), 2*(12+6))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("slot %d differs: %v vs %v", i, a[i], b[i])
		}
		if wt := a[i].Start.In(loc).Format("15:04"); wt < "08:00" {
			t.Fatalf("slot at %s local", wt)
		}
	}
	checkSlots(t, a, 20)
	// The Monday after the change still starts at 08:00 local.
	if got := a[len(a)/2].Start.In(loc).Format("Mon 15:04 MST"); got != "Mon 08:00 CEST" {
		t.Fatalf("second week starts %s", got)
	}
}

func TestLocalDates(t *testing.T) {
	t.Parallel()
	loc := mustLoc(t, "America/New_York")
	start := time.Date(2027, 3, 10, 3, 0, 0, 0, time.UTC) // 22:00 on the 9th local
	got := LocalDates(start, start.Add(48*time.Hour), loc)
	if len(got) != 3 || got[0].String() != "2027-03-09" || got[2].String() != "2027-03-11" {
		t.Fatalf("LocalDates = %v", got)
	}
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	if OnConfirm(StatusHeld) != ConfirmNow || OnConfirm(StatusConfirmed) != ConfirmAlready ||
		OnConfirm(StatusExpired) != ConfirmRetake || OnConfirm(StatusCancelled) != ConfirmRefuse ||
		OnConfirm(StatusNoShow) != ConfirmRefuse {
		t.Fatal("OnConfirm table is wrong")
	}
	if CanCancel(StatusCancelled) || CanCancel(StatusExpired) || !CanCancel(StatusHeld) || !CanCancel(StatusConfirmed) {
		t.Fatal("CanCancel is wrong")
	}
	if !Takeable(SlotOpen, false) || !Takeable(SlotHeld, true) || Takeable(SlotHeld, false) ||
		Takeable(SlotBooked, true) || Takeable(SlotBlocked, false) {
		t.Fatal("Takeable is wrong")
	}
	if Shown(SlotHeld, true) != SlotOpen || Shown(SlotHeld, false) != SlotHeld {
		t.Fatal("Shown is wrong")
	}
}

// TestStdlibOnly keeps the clinic rules free of drivers and transports.
func TestStdlibOnly(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.Contains(imp, ".") && !strings.HasPrefix(imp, "github.com/berthhq/berth/internal/reservation") {
			t.Errorf("imports %s; the clinic rules may import only the standard library", imp)
		}
		for _, bad := range []string{"net/http", "database/sql"} {
			if imp == bad {
				t.Errorf("imports %s", imp)
			}
		}
	}
}
