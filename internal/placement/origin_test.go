package placement

import (
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
)

func TestOriginPlan(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rules := OriginRules{MinWrites: 50, MinShare: 0.6, Margin: 2, Cooldown: time.Hour}
	home := func(id, region string, movedAgo time.Duration) Placement {
		return Placement{Kind: berth.KindHotel, PartitionID: id, HomeRegion: region, Version: 1, UpdatedAt: now.Add(-movedAgo)}
	}
	w := func(id, origin string, n int64) OriginCount {
		return OriginCount{Kind: berth.KindHotel, PartitionID: id, Origin: origin, Writes: n}
	}
	tests := []struct {
		name   string
		home   Placement
		counts []OriginCount
		move   string // "" = stays
		why    string
	}{
		{"guests book from abroad", home("a", "us-east", 2*time.Hour), []OriginCount{w("a", "eu-west", 90), w("a", "us-east", 10)}, "eu-west", "its writes come from eu-west"},
		{"already home", home("a", "eu-west", 2*time.Hour), []OriginCount{w("a", "eu-west", 90), w("a", "us-east", 10)}, "", "most writes already come from its home"},
		{"too few writes", home("a", "us-east", 2*time.Hour), []OriginCount{w("a", "eu-west", 40)}, "", "too few writes to judge"},
		{"even split never flaps", home("a", "us-east", 2*time.Hour), []OriginCount{w("a", "eu-west", 55), w("a", "ap-south", 50), w("a", "us-east", 5)}, "", "no region clearly leads"},
		{"home keeps a fair share", home("a", "us-east", 2*time.Hour), []OriginCount{w("a", "eu-west", 70), w("a", "us-east", 40)}, "", "the leader's margin over the home is too small"},
		{"moved recently", home("a", "us-east", 10*time.Minute), []OriginCount{w("a", "eu-west", 90)}, "", "moved recently (cooldown)"},
		{"counts add up over buckets", home("a", "ap-south", 2*time.Hour), []OriginCount{w("a", "eu-west", 30), w("a", "eu-west", 30), w("a", "ap-south", 5)}, "eu-west", "its writes come from eu-west"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plan, decisions := OriginPlan(tc.counts, []Placement{tc.home}, rules, now)
			if len(decisions) != 1 || decisions[0].Why != tc.why {
				t.Fatalf("decisions %+v, want why %q", decisions, tc.why)
			}
			switch {
			case tc.move == "" && len(plan) != 0:
				t.Fatalf("plan %+v, want none", plan)
			case tc.move != "" && (len(plan) != 1 || plan[0].To != tc.move || plan[0].From != tc.home.HomeRegion):
				t.Fatalf("plan %+v, want a move to %s", plan, tc.move)
			}
		})
	}
}

func TestOriginPlanOrdersByGainAndCaps(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var placements []Placement
	var counts []OriginCount
	for i, n := range []int64{100, 300, 200} {
		id := string(rune('a' + i))
		placements = append(placements, Placement{Kind: berth.KindHotel, PartitionID: id, HomeRegion: "us-east"})
		counts = append(counts, OriginCount{Kind: berth.KindHotel, PartitionID: id, Origin: "ap-south", Writes: n})
	}
	// Counted by a router but unknown to the directory: ignored.
	counts = append(counts, OriginCount{Kind: berth.KindHotel, PartitionID: "zzz", Origin: "ap-south", Writes: 1000})
	plan, decisions := OriginPlan(counts, placements, OriginRules{MinWrites: 1, MinShare: 0.5, Margin: 1, MaxMoves: 2}, now)
	if len(plan) != 2 || plan[0].PartitionID != "b" || plan[1].PartitionID != "c" {
		t.Fatalf("plan %+v, want b then c", plan)
	}
	if len(decisions) != 3 || decisions[2].PartitionID != "a" || decisions[2].Move || decisions[2].Why != "over this run's move limit" {
		t.Fatalf("decisions %+v", decisions)
	}
}
