package waitingroom_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/waitingroom"
)

func TestParseWindows(t *testing.T) {
	t.Parallel()
	w := windows(t, `[{"clinic_id":"C1","timezone":"Europe/Madrid","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":2.5,"weekdays":[1,7]}]`)
	c1, ok := w["c1"]
	if !ok || c1.Rate != 2.5 || c1.Start != 6*60+55 || c1.Opens != 7*60 || c1.End != 7*60+30 {
		t.Fatalf("parsed %+v", w)
	}
	// 2027-01-04 is a Monday, 2027-01-05 a Tuesday, 2027-01-10 a Sunday.
	if _, ok := c1.Active(at(4, 7, 10, 0)); !ok {
		t.Fatal("Monday 07:10 should be active")
	}
	if _, ok := c1.Active(at(5, 7, 10, 0)); ok {
		t.Fatal("Tuesday is not a window day")
	}
	if _, ok := c1.Active(at(10, 6, 55, 0)); !ok {
		t.Fatal("Sunday 06:55 (start, inclusive) should be active")
	}
	if _, ok := c1.Active(at(10, 7, 30, 0)); ok {
		t.Fatal("07:30 (end, exclusive) should not be active")
	}

	file := filepath.Join(t.TempDir(), "rooms.json")
	if err := os.WriteFile(file, []byte(morning), 0o600); err != nil {
		t.Fatal(err)
	}
	if w := windows(t, "@"+file); len(w) != 2 {
		t.Fatalf("from file: %v", w)
	}
	if w := windows(t, ""); len(w) != 0 {
		t.Fatalf("empty: %v", w)
	}

	for _, bad := range []string{
		`{}`, `[{"clinic_id":"c"}]`, `[{"clinic_id":"c","timezone":"Mars/Base","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":1}]`,
		`[{"clinic_id":"c","timezone":"UTC","start":"07:05","opens_at":"07:00","end":"07:30","admit_per_second":1}]`,
		`[{"clinic_id":"c","timezone":"UTC","start":"06:55","opens_at":"07:00","end":"07:00","admit_per_second":1}]`,
		`[{"clinic_id":"c","timezone":"UTC","start":"6h","opens_at":"07:00","end":"07:30","admit_per_second":1}]`,
		`[{"clinic_id":"c","timezone":"UTC","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":0}]`,
		`[{"clinic_id":"c","timezone":"UTC","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":1,"weekdays":[0]}]`,
		`[{"clinic_id":"c","timezone":"UTC","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":1,"extra":1}]`,
		`[{"clinic_id":"c","timezone":"UTC","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":1},
		  {"clinic_id":"C","timezone":"UTC","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":1}]`,
		"@/nonexistent/rooms.json",
	} {
		if _, err := waitingroom.ParseWindows(waitingroom.WindowsEnvVar, bad); err == nil || !strings.Contains(err.Error(), waitingroom.WindowsEnvVar) {
			t.Errorf("ParseWindows(%s) = %v, want an error naming %s", bad, err, waitingroom.WindowsEnvVar)
		}
	}
}

// TestWindowAcrossDST: the window is local clock time, so on the morning
// after the spring change (Madrid, 2027-03-28, 02:00 → 03:00) it opens at
// 07:00 CEST = 05:00 UTC, and the day before at 07:00 CET = 06:00 UTC.
func TestWindowAcrossDST(t *testing.T) {
	t.Parallel()
	c1 := windows(t, morning)["c1"]
	before, _ := c1.OnDate("2027-03-27")
	after, _ := c1.OnDate("2027-03-28")
	if got := before.Opens.UTC().Format("15:04"); got != "06:00" {
		t.Fatalf("2027-03-27 opens at %s UTC, want 06:00", got)
	}
	if got := after.Opens.UTC().Format("15:04"); got != "05:00" {
		t.Fatalf("2027-03-28 opens at %s UTC, want 05:00", got)
	}
	if in, ok := c1.Active(time.Date(2027, 3, 28, 5, 10, 0, 0, time.UTC)); !ok || in.Date != "2027-03-28" {
		t.Fatalf("05:10 UTC on the change day should be in the window: %+v %v", in, ok)
	}
}

func TestAdmittedFromElapsedTime(t *testing.T) {
	t.Parallel()
	in, _ := windows(t, morning)["c1"].OnDate("2027-01-04")
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{at(4, 6, 59, 59), 0}, {at(4, 7, 0, 0), 0}, {at(4, 7, 0, 1), 2}, {at(4, 7, 1, 0), 120}, {at(4, 7, 10, 0), 1200},
	} {
		if got := in.Admitted(tc.at); got != tc.want {
			t.Errorf("Admitted(%v) = %d, want %d", tc.at, got, tc.want)
		}
	}
	if got := in.AdmittedAt(3); !got.Equal(at(4, 7, 0, 1).Add(500 * time.Millisecond)) {
		t.Fatalf("AdmittedAt(3) = %v", got)
	}
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	kr := keyring(t, key2, key1)
	if kr.SigningKeyID() != "k2" {
		t.Fatalf("signing key %s, want the first (newest), k2", kr.SigningKeyID())
	}
	for _, bad := range []string{"", "k1", "k1:zz", "k1:0102", "k.1:" + strings.Repeat("01", 32), key1 + "," + key1} {
		_, err := waitingroom.ParseKeys(waitingroom.KeysEnvVar, bad)
		if err == nil || !strings.Contains(err.Error(), waitingroom.KeysEnvVar) {
			t.Errorf("ParseKeys(%q) = %v, want an error naming %s", bad, err, waitingroom.KeysEnvVar)
		}
		if err != nil && strings.Contains(err.Error(), "0101") {
			t.Errorf("error shows a secret: %v", err)
		}
	}
}
