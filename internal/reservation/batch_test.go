package reservation

import (
	"reflect"
	"testing"
)

func TestAllot(t *testing.T) {
	t.Parallel()
	const a, b, c = "2027-01-01", "2027-01-02", "2027-01-03"
	tests := []struct {
		name   string
		left   map[string]int
		claims []Claim
		want   []Allotment
	}{
		{"ample rooms: every claim wins, in order",
			map[string]int{a: 10, b: 10},
			[]Claim{{[]string{a, b}, 2}, {[]string{a}, 3}},
			[]Allotment{{Won: true, Left: []int{8, 8}}, {Won: true, Left: []int{5}}}},
		{"the last room goes to the first arrival",
			map[string]int{a: 1},
			[]Claim{{[]string{a}, 1}, {[]string{a}, 1}, {[]string{a}, 1}},
			[]Allotment{{Won: true, Left: []int{0}}, {Short: []string{a}}, {Short: []string{a}}}},
		{"a loser takes nothing, so a later smaller claim wins",
			map[string]int{a: 2, b: 2},
			[]Claim{{[]string{a, b}, 3}, {[]string{a, b}, 2}},
			[]Allotment{{Short: []string{a, b}}, {Won: true, Left: []int{0, 0}}}},
		{"a loser names only the nights that lacked",
			map[string]int{a: 1, b: 0, c: 1},
			[]Claim{{[]string{a, b, c}, 1}, {[]string{a, c}, 1}, {[]string{c}, 1}},
			[]Allotment{{Short: []string{b}}, {Won: true, Left: []int{0, 0}}, {Short: []string{c}}}},
		{"a night not loaded has nothing",
			map[string]int{a: 5},
			[]Claim{{[]string{a, b}, 1}},
			[]Allotment{{Short: []string{b}}}},
		{"overlapping stays share the nights they overlap",
			map[string]int{a: 1, b: 2, c: 1},
			[]Claim{{[]string{a, b}, 1}, {[]string{b, c}, 1}, {[]string{b}, 1}},
			[]Allotment{{Won: true, Left: []int{0, 1}}, {Won: true, Left: []int{0, 0}}, {Short: []string{b}}}},
		{"no quantity never wins",
			map[string]int{a: 5},
			[]Claim{{[]string{a}, 0}},
			[]Allotment{{Short: []string{a}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := map[string]int{}
			for k, v := range tt.left {
				before[k] = v
			}
			got := Allot(tt.left, tt.claims)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Allot = %+v, want %+v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.left, before) {
				t.Errorf("Allot changed its input: %v, was %v", tt.left, before)
			}
		})
	}
}
