package scenario

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/loadtest/internal/report"
)

// hotelWithUnsentSetup creates a hotel on the test server, which has no
// relay, and returns it with the count of its setup's events left unsent.
func hotelWithUnsentSetup(t *testing.T) (*Env, string, int64) {
	t.Helper()
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnv(t)
	h, err := e.CreateHotel(context.Background(), 0, "us-east", 1, 1, day(45), day(46))
	if err != nil {
		t.Fatal(err)
	}
	n, err := e.unsentEvents(context.Background(), h.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("the setup left no unsent event: nothing to wait for")
	}
	return e, h.ID, n
}

// A rush opens only once its setup's events have left the outbox: the test
// server has no relay, so the hotel's events stay unsent until the test
// marks them sent as a relay would, and the opening waits for that.
func TestRushOpensOnceItsSetupIsRelayed(t *testing.T) {
	e, hotel, _ := hotelWithUnsentSetup(t)
	ctx := context.Background()
	defer func(stall time.Duration) { settleStall = stall }(settleStall)
	settleStall = time.Minute // the relay is the test, below

	r := &report.Report{Figures: map[string]float64{}}
	done := make(chan error, 1)
	go func() { done <- e.openAfterSetup(ctx, r, "", 10*time.Millisecond, hotel) }()
	select {
	case err := <-done:
		t.Fatalf("opened with the setup unsent (err %v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := e.DB.Exec(ctx, `UPDATE outbox SET sent_at = now() WHERE partition_id = $1::UUID`, hotel); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting 30 s after the setup was relayed")
	}
	if _, ok := r.Figures["setup_relayed_ms"]; !ok {
		t.Errorf("no setup_relayed_ms figure: %v", r.Figures)
	}
	if r.Figures["settle_ms"] < r.Figures["setup_relayed_ms"] {
		t.Errorf("settle_ms %v < setup_relayed_ms %v: the grace was not waited", r.Figures["settle_ms"], r.Figures["setup_relayed_ms"])
	}
	if len(r.Notes) > 0 {
		t.Errorf("notes %q, want none", r.Notes)
	}
}

// Without a relay draining the setup the rush still opens, once the count
// has stopped falling, and the report says what was left unsent; a settle
// of 0 opens at once and waits for nothing.
func TestRushOpensWithoutARelay(t *testing.T) {
	e, hotel, unsent := hotelWithUnsentSetup(t)
	ctx := context.Background()

	r := &report.Report{Figures: map[string]float64{}}
	if err := e.openAfterSetup(ctx, r, "", 0, hotel); err != nil {
		t.Fatal(err)
	}
	if len(r.Figures) != 0 || len(r.Notes) != 0 {
		t.Errorf("a settle of 0 waited: figures %v, notes %q", r.Figures, r.Notes)
	}

	defer func(stall time.Duration) { settleStall = stall }(settleStall)
	settleStall = 200 * time.Millisecond
	if err := e.openAfterSetup(ctx, r, "shipped_", time.Millisecond, hotel); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Figures["shipped_settle_ms"]; !ok {
		t.Errorf("no shipped_settle_ms figure: %v", r.Figures)
	}
	if len(r.Notes) != 1 || !strings.HasPrefix(r.Notes[0], strconv.FormatInt(unsent, 10)+" event(s) of the setup were still unsent") {
		t.Errorf("notes %q, want one naming the %d unsent events", r.Notes, unsent)
	}
}

func TestCheckSettle(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, DefaultSettle} {
		if err := CheckSettle(d); err != nil {
			t.Errorf("CheckSettle(%s): %v", d, err)
		}
	}
	if err := CheckSettle(-time.Second); err == nil || !strings.Contains(err.Error(), "--settle") {
		t.Errorf("CheckSettle(-1s): err %v, want one naming --settle", err)
	}
}
