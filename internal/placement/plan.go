package placement

import (
	"cmp"
	"slices"

	"github.com/berthhq/berth/internal/berth"
)

// Item is a partition as the planners see it: where it lives and what it
// weighs (1 when balancing by count, its recent writes when by load).
type Item struct {
	Kind        berth.Kind `json:"kind"`
	PartitionID string     `json:"partition_id"`
	Region      string     `json:"region"`
	Weight      int64      `json:"weight"`
}

// Move is one step of a plan.
type Move struct {
	Kind        berth.Kind `json:"kind"`
	PartitionID string     `json:"partition_id"`
	From        string     `json:"from"`
	To          string     `json:"to"`
	Weight      int64      `json:"weight"`
}

func sortItems(items []Item) []Item {
	out := slices.Clone(items)
	slices.SortFunc(out, func(a, b Item) int {
		return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.PartitionID, b.PartitionID))
	})
	return out
}

// Totals sums the weights per region; every region of regions is present.
func Totals(items []Item, regions []string) map[string]int64 {
	t := make(map[string]int64, len(regions))
	for _, r := range regions {
		t[r] = 0
	}
	for _, it := range items {
		t[it.Region] += it.Weight
	}
	return t
}

// DrainPlan moves every item homed in region to one of targets: each goes to
// the target with the lowest total so far (ties: the order of targets), so
// the drained partitions spread evenly over what the targets already carry.
// The plan depends only on what is still in region, which is what makes a
// killed drain resumable: run it again and it plans what is left.
func DrainPlan(items []Item, region string, targets []string) []Move {
	if len(targets) == 0 {
		return nil
	}
	totals := Totals(items, targets)
	var plan []Move
	for _, it := range sortItems(items) {
		if it.Region != region {
			continue
		}
		best := targets[0]
		for _, t := range targets[1:] {
			if totals[t] < totals[best] {
				best = t
			}
		}
		totals[best] += it.Weight
		plan = append(plan, Move{Kind: it.Kind, PartitionID: it.PartitionID, From: region, To: best, Weight: it.Weight})
	}
	return plan
}

// BalancePlan evens out the regions' totals greedily: while moving some
// partition from the heaviest region to the lightest lowers the heavier of
// the two, move the one that brings them closest together. Partitions of
// weight 0 never move (by load: no recent writes means nothing to gain).
// Each partition appears at most once in the plan, with its final target.
func BalancePlan(items []Item, regions []string) []Move {
	if len(regions) < 2 {
		return nil
	}
	cur := sortItems(items)
	origin := make([]string, len(cur))
	for i, it := range cur {
		origin[i] = it.Region
	}
	totals := Totals(cur, regions)
	for range 2*len(cur) + 1 {
		hi, lo := regions[0], regions[0]
		for _, r := range regions {
			if totals[r] > totals[hi] {
				hi = r
			}
			if totals[r] < totals[lo] {
				lo = r
			}
		}
		diff := totals[hi] - totals[lo]
		pick := -1
		for i, it := range cur {
			if it.Region != hi || it.Weight <= 0 || it.Weight >= diff {
				continue
			}
			if pick < 0 || abs(diff-2*it.Weight) < abs(diff-2*cur[pick].Weight) {
				pick = i
			}
		}
		if pick < 0 {
			break
		}
		totals[hi] -= cur[pick].Weight
		totals[lo] += cur[pick].Weight
		cur[pick].Region = lo
	}
	var plan []Move
	for i, it := range cur {
		if it.Region != origin[i] {
			plan = append(plan, Move{Kind: it.Kind, PartitionID: it.PartitionID, From: origin[i], To: it.Region, Weight: it.Weight})
		}
	}
	return plan
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
