package appointment

import (
	"fmt"
	"testing"
	"time"
	_ "time/tzdata" // the zones below load on any machine
)

// FuzzParseClock: any input either fails or yields a minute of the day
// that formats back to the same text.
func FuzzParseClock(f *testing.F) {
	for _, s := range []string{"08:00", "23:59", "24:00", "25:00", "8:00", "", "12:60", "ab:cd", "00:00"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, allowEnd bool) {
		m, err := ParseClock(s, allowEnd)
		if err != nil {
			return
		}
		if m < 0 || m > 24*60 || (m == 24*60 && !allowEnd) {
			t.Fatalf("ParseClock(%q) = %d", s, m)
		}
		if got := fmt.Sprintf("%02d:%02d", m/60, m%60); got != s {
			t.Fatalf("ParseClock(%q) = %d, formats as %q", s, m, got)
		}
	})
}

// FuzzMaterialize: any template that validates yields, in any zone and
// around any day, slots of the right length that never overlap.
func FuzzMaterialize(f *testing.F) {
	f.Add(30, 7, "00:00", "05:00", "Europe/Berlin", int64(0))
	f.Add(45, 1, "08:00", "24:00", "America/New_York", int64(100))
	f.Add(5, 3, "01:30", "03:30", "Australia/Lord_Howe", int64(300))
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"}
	f.Fuzz(func(t *testing.T, minutes, weekday int, start, end, zone string, dayOffset int64) {
		weekly := []Window{{weekday, start, end}}
		if len(ValidateTemplate(minutes, weekly)) > 0 {
			return
		}
		loc, err := time.LoadLocation(zones[int(uint64(len(zone))%uint64(len(zones)))])
		if err != nil {
			t.Fatal(err)
		}
		from := DateOf(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)).AddDays(int(uint64(dayOffset) % 730))
		slots := Materialize(minutes, weekly, loc, from, from.AddDays(8))
		for i, s := range slots {
			if s.End.Sub(s.Start) != time.Duration(minutes)*time.Minute {
				t.Fatalf("slot %v has the wrong length", s)
			}
			if i > 0 && slots[i-1].End.After(s.Start) {
				t.Fatalf("slots %v and %v overlap", slots[i-1], s)
			}
		}
	})
}
