package waitingroom

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// The variables the configuration is read from.
const (
	// WindowsEnvVar holds the windows as JSON, or "@/path/to/file.json".
	WindowsEnvVar = "BERTH_WAITING_ROOMS"
	// KeysEnvVar holds the signing keys, "kid:hexsecret,…", newest first.
	KeysEnvVar = "BERTH_WAITING_ROOM_KEYS"
)

// Window is one clinic's daily waiting room, in the clinic's local time:
// the room accepts arrivals from Start, admits from Opens at Rate per
// second, and ends at End. While it is active, holds need an access token.
type Window struct {
	ClinicID string
	Location *time.Location
	// Start, Opens and End are minutes after local midnight.
	Start, Opens, End int
	// Rate is how many queued patients are admitted per second after Opens.
	Rate float64
	// Weekdays the window runs (time.Weekday); empty means every day.
	Weekdays []time.Weekday
}

// windowJSON is the configuration syntax of one window.
type windowJSON struct {
	ClinicID       string  `json:"clinic_id"`
	Timezone       string  `json:"timezone"`
	Start          string  `json:"start"`
	OpensAt        string  `json:"opens_at"`
	End            string  `json:"end"`
	AdmitPerSecond float64 `json:"admit_per_second"`
	// Weekdays, ISO numbering as in the API: 1 = Monday … 7 = Sunday.
	Weekdays []int `json:"weekdays,omitempty"`
}

// ParseWindows reads the windows from JSON, or from the file named after an
// "@". Example:
//
//	[{"clinic_id":"c1","timezone":"Europe/Madrid","start":"06:55",
//	  "opens_at":"07:00","end":"07:30","admit_per_second":2}]
//
// An empty value means no waiting rooms. Errors name the variable (name).
func ParseWindows(name, v string) (map[string]Window, error) {
	out := map[string]Window{}
	v = strings.TrimSpace(v)
	if v == "" {
		return out, nil
	}
	data := []byte(v)
	if path, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		data = b
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var raw []windowJSON
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: want a JSON array of {clinic_id, timezone, start, opens_at, end, admit_per_second[, weekdays]}: %w", name, err)
	}
	for i, r := range raw {
		w, err := r.window()
		if err != nil {
			return nil, fmt.Errorf("%s: window %d (clinic %q): %w", name, i, r.ClinicID, err)
		}
		if _, dup := out[w.ClinicID]; dup {
			return nil, fmt.Errorf("%s: clinic %q has two windows", name, w.ClinicID)
		}
		out[w.ClinicID] = w
	}
	return out, nil
}

func (r windowJSON) window() (Window, error) {
	w := Window{ClinicID: strings.ToLower(strings.TrimSpace(r.ClinicID)), Rate: r.AdmitPerSecond}
	if w.ClinicID == "" || len(w.ClinicID) > 64 {
		return w, fmt.Errorf("clinic_id: required, at most 64 characters")
	}
	if r.Timezone == "" {
		return w, fmt.Errorf("timezone: required (an IANA name such as Europe/Madrid)")
	}
	loc, err := time.LoadLocation(r.Timezone)
	if err != nil {
		return w, fmt.Errorf("timezone %q: %w", r.Timezone, err)
	}
	w.Location = loc
	for _, f := range []struct {
		name string
		in   string
		dst  *int
	}{{"start", r.Start, &w.Start}, {"opens_at", r.OpensAt, &w.Opens}, {"end", r.End, &w.End}} {
		t, err := time.Parse("15:04", f.in)
		if err != nil {
			return w, fmt.Errorf("%s %q: want HH:MM", f.name, f.in)
		}
		*f.dst = t.Hour()*60 + t.Minute()
	}
	if !(w.Start <= w.Opens && w.Opens < w.End) {
		return w, fmt.Errorf("want start <= opens_at < end, within one day")
	}
	if !(w.Rate > 0 && w.Rate <= 10000) || math.IsNaN(w.Rate) {
		return w, fmt.Errorf("admit_per_second: want a number in (0, 10000]")
	}
	for _, d := range r.Weekdays {
		if d < 1 || d > 7 {
			return w, fmt.Errorf("weekdays: %d: want 1 (Monday) to 7 (Sunday)", d)
		}
		w.Weekdays = append(w.Weekdays, time.Weekday(d%7))
	}
	return w, nil
}

// Instance is one day's occurrence of a window, in absolute time.
type Instance struct {
	ClinicID          string
	Date              string // local date, YYYY-MM-DD
	Start, Opens, End time.Time
	Rate              float64
}

// On returns the window's occurrence on the local date of t (whether or not
// t falls inside it), and false when the window does not run that day.
func (w Window) On(t time.Time) (Instance, bool) {
	local := t.In(w.Location)
	y, m, d := local.Date()
	return w.onDate(y, m, d)
}

func (w Window) onDate(y int, m time.Month, d int) (Instance, bool) {
	day := time.Date(y, m, d, 0, 0, 0, 0, w.Location)
	if len(w.Weekdays) > 0 && !slices.Contains(w.Weekdays, day.Weekday()) {
		return Instance{}, false
	}
	// time.Date, not day.Add: local clock times stay right across DST changes.
	at := func(min int) time.Time { return time.Date(y, m, d, min/60, min%60, 0, 0, w.Location) }
	return Instance{ClinicID: w.ClinicID, Date: day.Format(time.DateOnly),
		Start: at(w.Start), Opens: at(w.Opens), End: at(w.End), Rate: w.Rate}, true
}

// OnDate returns the occurrence on a local date (YYYY-MM-DD).
func (w Window) OnDate(date string) (Instance, bool) {
	d, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return Instance{}, false
	}
	return w.onDate(d.Year(), d.Month(), d.Day())
}

// Active returns the occurrence that t falls in, if any.
func (w Window) Active(t time.Time) (Instance, bool) {
	in, ok := w.On(t)
	if !ok || t.Before(in.Start) || !t.Before(in.End) {
		return Instance{}, false
	}
	return in, true
}

// Admitted is how many queue positions are admitted at t: none before the
// opening, then Rate per second from the head of the queue. It is computed
// from the elapsed time, so no background job advances the queue.
func (in Instance) Admitted(t time.Time) int64 {
	if t.Before(in.Opens) {
		return 0
	}
	return int64(math.Floor(t.Sub(in.Opens).Seconds() * in.Rate))
}

// AdmittedAt is when position p (1-based) is admitted.
func (in Instance) AdmittedAt(p int64) time.Time {
	return in.Opens.Add(time.Duration(math.Ceil(float64(p) / in.Rate * float64(time.Second))))
}

// Parse reads the values of BERTH_WAITING_ROOMS and
// BERTH_WAITING_ROOM_KEYS (the binary reads the environment). With no
// windows it returns no windows and no keys (no waiting room); windows
// without keys are an error.
func Parse(windows, keys string) (map[string]Window, *Keyring, error) {
	w, err := ParseWindows(WindowsEnvVar, windows)
	if err != nil || len(w) == 0 {
		return nil, nil, err
	}
	kr, err := ParseKeys(KeysEnvVar, keys)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (required when %s is set)", err, WindowsEnvVar)
	}
	return w, kr, nil
}
