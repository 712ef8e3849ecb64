package appointment

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// day makes n open 20-minute slots from 07:00, ids s00, s01, …
func day(n int) []Slot {
	t0 := time.Date(2027, 3, 1, 7, 0, 0, 0, time.UTC)
	out := make([]Slot, n)
	for i := range out {
		out[i] = Slot{ID: fmt.Sprintf("s%02d", i), StartsAt: t0.Add(time.Duration(i) * 20 * time.Minute), Status: SlotOpen}
		out[i].EndsAt = out[i].StartsAt.Add(20 * time.Minute)
	}
	return out
}

func ids(ss []Slot) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

func TestSpreadAlternatives(t *testing.T) {
	t.Parallel()
	all := day(24)
	at := func(i int) time.Time { return all[i].StartsAt }
	tests := []struct {
		name   string
		open   []Slot
		around time.Time
		// buckets[i] are the slots the i-th alternative may be.
		buckets [][]string
	}{
		{"none open", nil, at(0), nil},
		{"fewer than three: all, nearest first", []Slot{all[9], all[2], all[4]}, at(3),
			[][]string{{"s02"}, {"s04"}, {"s09"}}},
		{"six open: buckets of two", slices.Concat(all[10:13], all[5:8]), at(9),
			[][]string{{"s10", "s07"}, {"s11", "s06"}, {"s12", "s05"}}},
		{"a full day after the first hour: buckets of four, later ones farther", all[3:], at(0),
			[][]string{{"s03", "s04", "s05", "s06"}, {"s07", "s08", "s09", "s10"}, {"s11", "s12", "s13", "s14"}}},
		{"both sides: by distance, ties earlier first", slices.Concat(all[:10], all[11:]), at(10),
			[][]string{{"s09", "s11", "s08", "s12"}, {"s07", "s13", "s06", "s14"}, {"s05", "s15", "s04", "s16"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for g := range 50 {
				guest := fmt.Sprintf("guest-%d", g)
				got := SpreadAlternatives(guest, tc.around, tc.open)
				if len(got) != len(tc.buckets) {
					t.Fatalf("%s: got %v, want %d alternatives", guest, ids(got), len(tc.buckets))
				}
				for i, s := range got {
					if !slices.Contains(tc.buckets[i], s.ID) {
						t.Fatalf("%s: alternative %d is %s, want one of %v (all: %v)", guest, i, s.ID, tc.buckets[i], ids(got))
					}
				}
				// The same guest in the same state is offered the same slots,
				// whatever order the store read them in.
				rev := slices.Clone(tc.open)
				slices.Reverse(rev)
				if again := SpreadAlternatives(guest, tc.around, rev); !slices.Equal(ids(again), ids(got)) {
					t.Fatalf("%s: %v, then %v for the same state", guest, ids(got), ids(again))
				}
			}
		})
	}
}

// The losers of one slot are offered different first alternatives: over
// many guests every slot of the nearest bucket is somebody's first choice,
// in shares none of which takes the whole herd.
func TestSpreadAlternativesSpreadsTheHerd(t *testing.T) {
	t.Parallel()
	all := day(24)
	first := map[string]int{}
	const guests = 400
	for g := range guests {
		first[SpreadAlternatives(fmt.Sprintf("pat-%04d", g), all[0].StartsAt, all[1:])[0].ID]++
	}
	if len(first) != AlternativeBucket {
		t.Fatalf("first alternatives over %d guests: %v, want the %d nearest slots each chosen", guests, first, AlternativeBucket)
	}
	for id, n := range first {
		if n > guests/2 {
			t.Errorf("slot %s is the first alternative of %d of %d guests: %v", id, n, guests, first)
		}
	}
}
