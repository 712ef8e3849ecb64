package cpu

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, line string
		want       time.Duration
		err        bool
	}{
		{"plain", "4242 (booking) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 12 0 100 0 0", 3250 * time.Millisecond, false},
		{"name with spaces and parens", "7 (a b) (c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 0 0", 30 * time.Millisecond, false},
		{"truncated", "7 (x) R 1 7", 0, true},
		{"no name", "7 x R", 0, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 u 2 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStat([]byte(tc.line))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("parseStat = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestParseProcs(t *testing.T) {
	t.Parallel()
	got, err := ParseProcs("router-us-east=12, nats=7,")
	if err != nil || len(got) != 2 || got[0] != (Proc{"router-us-east", 12}) || got[1] != (Proc{"nats", 7}) {
		t.Fatalf("ParseProcs = %v, %v", got, err)
	}
	for _, bad := range []string{"router", "=3", "x=0", "x=-1", "x=y"} {
		if _, err := ParseProcs(bad); err == nil {
			t.Errorf("ParseProcs(%q): no error", bad)
		}
	}
}

// The meter sees CPU this process burns between Start and Stop, in the row
// of its name, and counts a discovered process that is gone at Stop as
// incomplete instead of failing.
func TestMeterAccountsBurntCPU(t *testing.T) {
	ctx := context.Background()
	self := os.Getpid()
	gone := Proc{"gone", self}
	first := true
	m := NewMeter([]Proc{{"self", self}}, func(context.Context) ([]Proc, error) {
		if first {
			first = false
			return []Proc{gone}, nil
		}
		return nil, nil
	})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t0, err := Time(self)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has charged this process at least 50 ms more
	// (however long a busy machine takes to give it that).
	for x := 0; ; x++ {
		if x%1_000_000 == 0 {
			now, err := Time(self)
			if err != nil {
				t.Fatal(err)
			}
			if now-t0 >= 50*time.Millisecond {
				break
			}
		}
	}
	rows, err := m.Stop(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Name != "gone" || !rows[0].Incomplete || rows[1].Name != "self" {
		t.Fatalf("rows = %+v; want gone (incomplete) and self", rows)
	}
	if s := rows[1]; s.Seconds < 0.05 || s.MsPerOp != 1000*s.Seconds/10 || s.PIDs != 1 {
		t.Fatalf("self = %+v; want ≥ 0.05 s, ms per op = s/10", s)
	}
}

func TestParseSchedstat(t *testing.T) {
	t.Parallel()
	if n, err := parseSchedstat([]byte("26352444 8397301 15\n")); err != nil || n != 15 {
		t.Fatalf("parseSchedstat = %d, %v; want 15", n, err)
	}
	for _, bad := range []string{"", "1 2", "1 2 x"} {
		if _, err := parseSchedstat([]byte(bad)); err == nil {
			t.Errorf("parseSchedstat(%q): no error", bad)
		}
	}
}

// A thread that sleeps and wakes n times is switched onto a CPU at least n
// times: the meter's row of this process counts them.
func TestMeterCountsSwitches(t *testing.T) {
	ctx := context.Background()
	m := NewMeter([]Proc{{"self", os.Getpid()}}, nil)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const wakes = 50
	for range wakes {
		time.Sleep(time.Millisecond)
	}
	rows, err := m.Stop(ctx, wakes)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Switches < wakes || rows[0].SwitchesPerOp != float64(rows[0].Switches)/wakes {
		t.Fatalf("rows = %+v; want at least %d switches, per op = switches/%d", rows, wakes, wakes)
	}
}
