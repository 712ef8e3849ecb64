package placement

import (
	"context"
	"fmt"
	"testing"

	"github.com/berthhq/berth/internal/berth"
)

type fakeSource struct{ rows map[string]Placement }

func (f *fakeSource) ListPlacements(context.Context, berth.Kind, string) ([]Placement, error) {
	var out []Placement
	for _, p := range f.rows {
		out = append(out, p)
	}
	return out, nil
}

func (f *fakeSource) GetPlacement(_ context.Context, _ berth.Kind, id string) (Placement, error) {
	p, ok := f.rows[id]
	if !ok {
		return p, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	return p, nil
}

func TestDirectoryNeverGoesBackInVersion(t *testing.T) {
	t.Parallel()
	src := &fakeSource{rows: map[string]Placement{"a": {Kind: "hotel", PartitionID: "a", HomeRegion: "us-east", Version: 1}}}
	d := NewDirectory(src, nil)
	if err := d.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !d.Apply("hotel", "a", "eu-west", 3) {
		t.Fatal("newer version not applied")
	}
	if d.Apply("hotel", "a", "ap-south", 2) {
		t.Fatal("older version applied")
	}
	// A reload that read the old row (version 1) must not undo version 3.
	if err := d.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r, v, _ := d.Lookup("hotel", "a"); r != "eu-west" || v != 3 {
		t.Fatalf("got %s v%d, want eu-west v3", r, v)
	}
	// Refresh after a 421 picks up a newer row.
	src.rows["a"] = Placement{Kind: "hotel", PartitionID: "a", HomeRegion: "ap-south", Version: 4}
	if r, ok, err := d.Refresh(context.Background(), "hotel", "a"); err != nil || !ok || r != "ap-south" {
		t.Fatalf("refresh: %s %v %v", r, ok, err)
	}
	// Unknown partitions resolve to not-found, without error.
	if _, ok, err := d.Resolve(context.Background(), "hotel", "zzz"); ok || err != nil {
		t.Fatalf("unknown: %v %v", ok, err)
	}
	// A partition created after the load is found on a miss.
	src.rows["b"] = Placement{Kind: "hotel", PartitionID: "b", HomeRegion: "eu-west", Version: 1}
	if r, ok, err := d.Resolve(context.Background(), "hotel", "b"); err != nil || !ok || r != "eu-west" {
		t.Fatalf("miss: %s %v %v", r, ok, err)
	}
}

var regions = []string{"us-east", "eu-west", "ap-south"}

func items(counts map[string]int, weight int64) []Item {
	var out []Item
	for _, r := range regions {
		for i := range counts[r] {
			out = append(out, Item{Kind: "hotel", PartitionID: fmt.Sprintf("%s-%03d", r, i), Region: r, Weight: weight})
		}
	}
	return out
}

func apply(items []Item, plan []Move) []Item {
	at := map[string]string{}
	for _, m := range plan {
		at[m.PartitionID] = m.To
	}
	out := make([]Item, len(items))
	for i, it := range items {
		if to, ok := at[it.PartitionID]; ok {
			it.Region = to
		}
		out[i] = it
	}
	return out
}

func TestDrainPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		counts  map[string]int
		targets []string
		want    map[string]int64
	}{
		{"even", map[string]int{"us-east": 6, "eu-west": 2, "ap-south": 2}, []string{"eu-west", "ap-south"}, map[string]int64{"eu-west": 5, "ap-south": 5}},
		{"fills the lighter first", map[string]int{"us-east": 4, "eu-west": 4}, []string{"eu-west", "ap-south"}, map[string]int64{"eu-west": 4, "ap-south": 4}},
		{"one target", map[string]int{"us-east": 3, "eu-west": 1, "ap-south": 1}, []string{"ap-south"}, map[string]int64{"eu-west": 1, "ap-south": 4}},
		{"nothing left", map[string]int{"eu-west": 3}, []string{"eu-west", "ap-south"}, map[string]int64{"eu-west": 3, "ap-south": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			its := items(tt.counts, 1)
			plan := DrainPlan(its, "us-east", tt.targets)
			if len(plan) != tt.counts["us-east"] {
				t.Fatalf("plan has %d moves, want %d", len(plan), tt.counts["us-east"])
			}
			got := Totals(apply(its, plan), regions)
			if got["us-east"] != 0 {
				t.Fatalf("us-east still has %d", got["us-east"])
			}
			for r, w := range tt.want {
				if got[r] != w {
					t.Errorf("%s: %d, want %d (%v)", r, got[r], w, got)
				}
			}
		})
	}
}

func TestBalancePlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		items     []Item
		maxSpread int64
		moves     int
	}{
		{"by count", items(map[string]int{"us-east": 9, "eu-west": 3, "ap-south": 0}, 1), 0, 5},
		{"already even", items(map[string]int{"us-east": 2, "eu-west": 2, "ap-south": 1}, 1), 1, 0},
		{"by load: the hot partition goes to an empty region", []Item{
			{Kind: "hotel", PartitionID: "hot", Region: "us-east", Weight: 100},
			{Kind: "hotel", PartitionID: "a", Region: "us-east", Weight: 10},
			{Kind: "hotel", PartitionID: "b", Region: "us-east", Weight: 10},
			{Kind: "hotel", PartitionID: "c", Region: "eu-west", Weight: 0},
		}, 100, 1},
		{"empty", nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := BalancePlan(tt.items, regions)
			if len(plan) != tt.moves {
				t.Fatalf("plan %v: %d moves, want %d", plan, len(plan), tt.moves)
			}
			tot := Totals(apply(tt.items, plan), regions)
			hi, lo := tot[regions[0]], tot[regions[0]]
			for _, v := range tot {
				hi, lo = max(hi, v), min(lo, v)
			}
			if hi-lo > tt.maxSpread {
				t.Fatalf("spread %d > %d: %v", hi-lo, tt.maxSpread, tot)
			}
			for _, m := range plan {
				if m.From == m.To {
					t.Fatalf("no-op move %v", m)
				}
			}
		})
	}
}
