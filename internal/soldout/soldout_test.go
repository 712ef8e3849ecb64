package soldout

import (
	"slices"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestRefusesWhatItLearntUntilForgottenOrExpired(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c := New(time.Second, clk.now)
	stay := []string{"2027-01-01", "2027-01-02", "2027-01-03"}
	if got := c.Refuses("h", "rt", stay, 1); got != nil {
		t.Fatalf("empty cache refused %v", got)
	}
	c.Learn("h", "rt", []string{"2027-01-02"}, 2, c.Generation("h"))
	for _, tc := range []struct {
		name   string
		hotel  string
		rt     string
		nights []string
		qty    int
		want   []string
	}{
		{"the night, same quantity", "h", "rt", stay, 2, []string{"2027-01-02"}},
		{"the night, more rooms", "h", "rt", stay, 3, []string{"2027-01-02"}},
		{"fewer rooms than refused may fit", "h", "rt", stay, 1, nil},
		{"other nights", "h", "rt", []string{"2027-01-01", "2027-01-03"}, 5, nil},
		{"other room type", "h", "rt2", stay, 5, nil},
		{"other hotel", "h2", "rt", stay, 5, nil},
	} {
		if got := c.Refuses(tc.hotel, tc.rt, tc.nights, tc.qty); !slices.Equal(got, tc.want) {
			t.Errorf("%s: refuses %v, want %v", tc.name, got, tc.want)
		}
	}
	clk.t = clk.t.Add(999 * time.Millisecond)
	if got := c.Refuses("h", "rt", stay, 2); len(got) != 1 {
		t.Errorf("within the TTL: refuses %v", got)
	}
	clk.t = clk.t.Add(time.Millisecond)
	if got := c.Refuses("h", "rt", stay, 2); got != nil {
		t.Errorf("at the TTL, the first caller (the probe) is refused %v", got)
	}
	if got := c.Refuses("h", "rt", stay, 2); len(got) != 1 {
		t.Errorf("while the probe runs, the others are not refused: %v", got)
	}
	c.Taken("h", "rt", []string{"2027-01-02"})
	if got := c.Refuses("h", "rt", stay, 2); got != nil {
		t.Errorf("the probe took the night, yet refuses %v", got)
	}
	// A probe that never answers holds the others back one more TTL only.
	c.Learn("h", "rt", []string{"2027-01-02"}, 2, c.Generation("h"))
	clk.t = clk.t.Add(time.Second)
	if c.Refuses("h", "rt", stay, 2) != nil || c.Refuses("h", "rt", stay, 2) == nil {
		t.Error("want one probe, then refusals")
	}
	clk.t = clk.t.Add(time.Second)
	if got := c.Refuses("h", "rt", stay, 2); got != nil {
		t.Errorf("a TTL after a silent probe, a new probe is refused %v", got)
	}
	c.Learn("h", "rt", []string{"2027-01-02"}, 2, c.Generation("h"))
	if got := c.Refuses("h", "rt", stay, 2); len(got) != 1 {
		t.Errorf("the probe's refusal refreshes the entry, yet refuses %v", got)
	}
	c.Learn("h", "rt", []string{"2027-01-02"}, 1, c.Generation("h"))
	c.Forget("h")
	if got := c.Refuses("h", "rt", stay, 1); got != nil {
		t.Errorf("after Forget: refuses %v", got)
	}
}

// A refusal computed before rooms came back must not be kept: the hold read
// the generation, the cancel committed and forgot, then the refusal lands.
func TestLateRefusalIsNotKept(t *testing.T) {
	t.Parallel()
	for _, known := range []bool{false, true} {
		c := New(time.Minute, nil)
		if known {
			c.Learn("h", "other", []string{"2027-01-09"}, 1, c.Generation("h"))
		}
		gen := c.Generation("h")
		c.Forget("h")
		c.Learn("h", "rt", []string{"2027-01-02"}, 1, gen)
		if got := c.Refuses("h", "rt", []string{"2027-01-02"}, 1); got != nil {
			t.Errorf("known=%v: a refusal older than the Forget refuses %v", known, got)
		}
		c.Learn("h", "rt", []string{"2027-01-02"}, 1, c.Generation("h"))
		if got := c.Refuses("h", "rt", []string{"2027-01-02"}, 1); len(got) != 1 {
			t.Errorf("known=%v: a refusal after the Forget is not kept: %v", known, got)
		}
	}
}
