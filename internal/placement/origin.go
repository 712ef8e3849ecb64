package placement

import (
	"cmp"
	"slices"
	"time"

	"github.com/berthhq/berth/internal/berth"
)

// OriginCount is how many writes of one partition entered the platform
// through one region's routers (the region of the clients who made them)
// within some window.
type OriginCount struct {
	Kind        berth.Kind `json:"kind"`
	PartitionID string     `json:"partition_id"`
	Origin      string     `json:"origin"`
	Writes      int64      `json:"writes"`
}

// OriginRules are the hysteresis of placement by origin: a partition moves
// to the region that writes it most only when that region clearly leads,
// and not again soon after it moved.
type OriginRules struct {
	// MinWrites: the leading region wrote the partition at least this often
	// in the window (too few writes say nothing about where guests are).
	MinWrites int64
	// MinShare: ... and made at least this share of all its writes (> 0.5:
	// a partition written evenly from two regions never flaps between them).
	MinShare float64
	// Margin: ... and at least Margin times the writes made from the
	// current home region (≥ 1).
	Margin float64
	// Cooldown: a partition whose placement changed less than this long ago
	// stays where it is (the workload must keep its new shape).
	Cooldown time.Duration
	// MaxMoves caps one plan (0: no cap); the largest gains come first.
	MaxMoves int
}

// OriginDecision is the planner's view of one partition that had writes:
// where its writes came from and whether it should move.
type OriginDecision struct {
	Kind        berth.Kind       `json:"kind"`
	PartitionID string           `json:"partition_id"`
	Home        string           `json:"home"`
	Leader      string           `json:"leader"`
	Writes      map[string]int64 `json:"writes"` // by origin region
	Total       int64            `json:"total"`
	Move        bool             `json:"move"`
	Why         string           `json:"why"`
}

// OriginPlan decides, for every partition with writes in counts, whether to
// move its home to the region its writes come from, by rules; placements
// give the current homes and when each last changed. The moves come first
// in order of gain (the leader's writes minus the home's), capped by
// MaxMoves; Weight is the leader's writes. Partitions without a placement
// (deleted, or garbage counted by a router) are ignored.
func OriginPlan(counts []OriginCount, placements []Placement, rules OriginRules, now time.Time) ([]Move, []OriginDecision) {
	type pk struct {
		kind berth.Kind
		id   string
	}
	homes := make(map[pk]Placement, len(placements))
	for _, p := range placements {
		homes[pk{p.Kind, p.PartitionID}] = p
	}
	byPartition := map[pk]map[string]int64{}
	for _, c := range counts {
		k := pk{c.Kind, c.PartitionID}
		if _, ok := homes[k]; !ok || c.Writes <= 0 {
			continue
		}
		if byPartition[k] == nil {
			byPartition[k] = map[string]int64{}
		}
		byPartition[k][c.Origin] += c.Writes
	}
	var decisions []OriginDecision
	for k, writes := range byPartition {
		p := homes[k]
		d := OriginDecision{Kind: k.kind, PartitionID: k.id, Home: p.HomeRegion, Writes: writes}
		origins := make([]string, 0, len(writes))
		for o, n := range writes {
			origins = append(origins, o)
			d.Total += n
		}
		// The leader: most writes, ties broken by name so plans repeat.
		slices.SortFunc(origins, func(a, b string) int { return cmp.Or(cmp.Compare(writes[b], writes[a]), cmp.Compare(a, b)) })
		d.Leader = origins[0]
		lead, home := writes[d.Leader], writes[p.HomeRegion]
		switch {
		case d.Leader == p.HomeRegion:
			d.Why = "most writes already come from its home"
		case lead < rules.MinWrites:
			d.Why = "too few writes to judge"
		case float64(lead) < rules.MinShare*float64(d.Total):
			d.Why = "no region clearly leads"
		case float64(lead) < rules.Margin*float64(home):
			d.Why = "the leader's margin over the home is too small"
		case !p.UpdatedAt.IsZero() && now.Sub(p.UpdatedAt) < rules.Cooldown:
			d.Why = "moved recently (cooldown)"
		default:
			d.Move, d.Why = true, "its writes come from "+d.Leader
		}
		decisions = append(decisions, d)
	}
	gain := func(d OriginDecision) int64 { return d.Writes[d.Leader] - d.Writes[d.Home] }
	slices.SortFunc(decisions, func(a, b OriginDecision) int {
		return cmp.Or(cmp.Compare(gain(b), gain(a)), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.PartitionID, b.PartitionID))
	})
	var plan []Move
	for i, d := range decisions {
		if !d.Move {
			continue
		}
		if rules.MaxMoves > 0 && len(plan) >= rules.MaxMoves {
			decisions[i].Move, decisions[i].Why = false, "over this run's move limit"
			continue
		}
		plan = append(plan, Move{Kind: d.Kind, PartitionID: d.PartitionID, From: d.Home, To: d.Leader, Weight: d.Writes[d.Leader]})
	}
	return plan, decisions
}
