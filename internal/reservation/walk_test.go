package reservation

import "testing"

func TestOnWalkAnswer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		status        Status
		current, walk string
		held          bool
		want          WalkStep
	}{
		{"held answer of the walk in progress", StatusWalking, "w1", "w1", true, WalkFinish},
		{"refused answer of the walk in progress", StatusWalking, "w1", "w1", false, WalkFinish},
		{"held answer replayed after walked", StatusWalked, "w1", "w1", true, WalkDone},
		{"refused answer replayed after the undo", StatusConfirmed, "", "w1", false, WalkDone},
		{"refused answer of an earlier walk while walking again", StatusWalking, "w2", "w1", false, WalkStale},
		{"held answer for a stay not walking", StatusConfirmed, "", "w1", true, WalkStale},
		{"answer of another walk after walked", StatusWalked, "w2", "w1", true, WalkStale},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := OnWalkAnswer(c.status, c.current, c.walk, c.held); got != c.want {
				t.Fatalf("OnWalkAnswer(%s, %q, %q, %v) = %d, want %d", c.status, c.current, c.walk, c.held, got, c.want)
			}
		})
	}
}

func TestOnWalk(t *testing.T) {
	t.Parallel()
	d := func(s string) Date {
		v, err := ParseDate(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	stay := Stay{d("2027-05-10"), d("2027-05-12")}
	cases := []struct {
		status Status
		today  string
		want   WalkAction
	}{
		{StatusConfirmed, "2027-05-10", WalkNow},
		{StatusConfirmed, "2027-05-11", WalkNow},
		{StatusConfirmed, "2027-05-09", WalkTooEarly},
		{StatusConfirmed, "2027-05-12", WalkOver},
		{StatusWalking, "2027-05-10", WalkRefuse},
		{StatusCheckedIn, "2027-05-10", WalkRefuse},
		{StatusHeld, "2027-05-10", WalkRefuse},
	}
	for _, c := range cases {
		if got := OnWalk(c.status, stay, d(c.today)); got != c.want {
			t.Errorf("OnWalk(%s, %s) = %d, want %d", c.status, c.today, got, c.want)
		}
	}
	if !StatusWalking.Occupies() || StatusWalked.Occupies() || StatusWalking.Live() {
		t.Fatal("a walking stay occupies its nights and cannot be cancelled; a walked one holds none")
	}
	if got := WalkCharge(12000, stay, 2); got != 48000 {
		t.Fatalf("WalkCharge = %d, want 2 nights × 2 rooms × 12000", got)
	}
}
