package appointment

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Limits of a doctor's template and of what a client may ask for.
const (
	MinSlotMinutes = 5
	MaxSlotMinutes = 480
	// MaxWindows bounds the entries of one weekly template.
	MaxWindows = 50
	// DefaultRollingWeeks is how far ahead the rolling job keeps slots.
	DefaultRollingWeeks = 8
	// MaxMaterializeDays bounds one materialize request.
	MaxMaterializeDays = 366
	// MaxSearchWindow bounds an "any slot in this window" request.
	MaxSearchWindow = 31 * 24 * time.Hour
)

// Window is one entry of a weekly template: on Weekday (1 = Monday … 7 =
// Sunday), slots from Start to End, local wall-clock times "HH:MM".
type Window struct {
	Weekday int    `json:"weekday"`
	Start   string `json:"start"`
	End     string `json:"end"`
}

// FieldError names one invalid field of a template.
type FieldError struct {
	Field, Message string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// ParseClock parses a strict 24-hour "HH:MM" into minutes after midnight.
// "24:00" is accepted only when allowEnd is set (the end of a day).
func ParseClock(s string, allowEnd bool) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, errors.New(`want a time as "HH:MM"`)
	}
	for _, i := range []int{0, 1, 3, 4} {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New(`want a time as "HH:MM"`)
		}
	}
	h := int(s[0]-'0')*10 + int(s[1]-'0')
	m := int(s[3]-'0')*10 + int(s[4]-'0')
	if allowEnd && h == 24 && m == 0 {
		return 24 * 60, nil
	}
	if h > 23 || m > 59 {
		return 0, errors.New("want a time from 00:00 to 23:59")
	}
	return h*60 + m, nil
}

// span is a parsed Window.
type span struct {
	weekday    time.Weekday
	start, end int // minutes after local midnight
}

// ValidateTemplate checks a doctor's slot length and weekly template and
// returns every problem found, each naming its field ("weekly[2].start").
func ValidateTemplate(slotMinutes int, weekly []Window) []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{field, fmt.Sprintf(format, args...)})
	}
	if slotMinutes < MinSlotMinutes || slotMinutes > MaxSlotMinutes {
		add("slot_minutes", "want %d to %d", MinSlotMinutes, MaxSlotMinutes)
	}
	if len(weekly) == 0 {
		add("weekly", "want at least one entry")
	}
	if len(weekly) > MaxWindows {
		add("weekly", "at most %d entries", MaxWindows)
		return errs
	}
	var spans []span
	for i, w := range weekly {
		f := fmt.Sprintf("weekly[%d]", i)
		ok := true
		if w.Weekday < 1 || w.Weekday > 7 {
			add(f+".weekday", "want 1 (Monday) to 7 (Sunday)")
			ok = false
		}
		start, err := ParseClock(w.Start, false)
		if err != nil {
			add(f+".start", "%v", err)
			ok = false
		}
		end, err := ParseClock(w.End, true)
		if err != nil {
			add(f+".end", "%v", err)
			ok = false
		}
		if !ok {
			continue
		}
		if end <= start {
			add(f+".end", "must be after start")
			continue
		}
		if slotMinutes >= MinSlotMinutes && end-start < slotMinutes {
			add(f+".end", "the window is shorter than one slot")
			continue
		}
		spans = append(spans, span{weekdayOf(w.Weekday), start, end})
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].weekday != spans[j].weekday {
			return spans[i].weekday < spans[j].weekday
		}
		return spans[i].start < spans[j].start
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].weekday == spans[i-1].weekday && spans[i].start < spans[i-1].end {
			add("weekly", "windows of one weekday overlap")
			break
		}
	}
	return errs
}

// weekdayOf maps the API's 1 = Monday … 7 = Sunday to time.Weekday.
func weekdayOf(n int) time.Weekday { return time.Weekday(n % 7) }

// SlotTime is one slot a template yields: the instants it covers and the
// local calendar day it belongs to.
type SlotTime struct {
	Start, End time.Time // UTC
	LocalDate  Date
}

// Materialize turns a template into the slots of the local days [from, to)
// in loc. The template is wall-clock time: a slot whose local start does not
// exist (the hour skipped when clocks go forward) is left out, and a local
// start that occurs twice (the hour repeated when clocks go back) yields one
// slot, at its first occurrence. A slot lasts slotMinutes of real time, and
// one that would overlap the slot before it (possible only next to a
// skipped hour) is left out. The result is sorted by start. The template must have passed ValidateTemplate.
func Materialize(slotMinutes int, weekly []Window, loc *time.Location, from, to Date) []SlotTime {
	byDay := map[time.Weekday][]span{}
	for _, w := range weekly {
		start, err1 := ParseClock(w.Start, false)
		end, err2 := ParseClock(w.End, true)
		if err1 != nil || err2 != nil || w.Weekday < 1 || w.Weekday > 7 {
			continue
		}
		wd := weekdayOf(w.Weekday)
		byDay[wd] = append(byDay[wd], span{wd, start, end})
	}
	var out []SlotTime
	step := time.Duration(slotMinutes) * time.Minute
	for d := from; d.Before(to); d = d.AddDays(1) {
		for _, sp := range byDay[d.Time().Weekday()] {
			for m := sp.start; m+slotMinutes <= sp.end; m += slotMinutes {
				start, ok := LocalInstant(d, m, loc)
				if !ok {
					continue
				}
				out = append(out, SlotTime{Start: start.UTC(), End: start.Add(step).UTC(), LocalDate: d})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	// Wall-clock steps and real-time lengths disagree only around a
	// transition: a slot straddling the skipped hour ends after the next
	// wall-clock start (29-minute slots across 02:00→03:00, say). A doctor
	// sees one patient at a time, so a slot that would overlap the one
	// before is left out.
	kept := out[:0]
	for _, s := range out {
		if len(kept) > 0 && s.Start.Before(kept[len(kept)-1].End) {
			continue
		}
		kept = append(kept, s)
	}
	return kept
}

// LocalInstant returns the instant at which the wall clock of loc shows
// minute m of day d. ok is false when that wall time does not exist on d
// (clocks jumped over it). When it exists twice, the earlier is returned.
func LocalInstant(d Date, m int, loc *time.Location) (time.Time, bool) {
	y, mo, da := d.Time().Date()
	hh, mm := m/60, m%60
	t := time.Date(y, mo, da, hh, mm, 0, 0, loc)
	if !showsWallClock(t, y, mo, da, hh, mm) {
		return time.Time{}, false
	}
	// time.Date may pick either occurrence of a repeated wall time; step
	// back over the largest offset change any zone uses and keep the
	// earliest instant that still shows the same wall clock.
	earliest := t
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if c := t.Add(-back); showsWallClock(c, y, mo, da, hh, mm) {
			earliest = c
		}
	}
	return earliest, true
}

func showsWallClock(t time.Time, y int, mo time.Month, d, hh, mm int) bool {
	ty, tmo, td := t.Date()
	return ty == y && tmo == mo && td == d && t.Hour() == hh && t.Minute() == mm
}

// LocalDates returns the local calendar days of loc touched by the instants
// [start, end), ascending.
func LocalDates(start, end time.Time, loc *time.Location) []Date {
	first := DateOf(start.In(loc))
	last := DateOf(end.Add(-time.Nanosecond).In(loc))
	var out []Date
	for d := first; !last.Before(d); d = d.AddDays(1) {
		out = append(out, d)
	}
	return out
}
