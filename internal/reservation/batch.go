package reservation

// Claim is one hold of a batch of holds on one room type: the nights it
// needs and how many rooms of each.
type Claim struct {
	Nights   []string // YYYY-MM-DD, each once
	Quantity int
}

// Allotment is what a batch decided for one claim.
type Allotment struct {
	// Won: every night of the claim had its rooms, and the claim takes them.
	Won bool
	// Short names the nights that lacked the rooms when the claim's turn
	// came (a loser's answer); empty for a winner.
	Short []string
	// Left is what each night of a winner has left after it (in the
	// claim's order of nights): what its event reports.
	Left []int
}

// Allot decides a batch of holds in arrival order: a claim wins when every
// one of its nights still has its quantity after the claims before it, and
// then takes it; a claim that lacks any night takes nothing, so a later,
// smaller claim may still win what it left. left is what each night has
// before the batch (sellable limit minus rooms taken); a night missing from
// it has nothing. left is not changed.
//
// This is the whole decision of a batch; the store only executes it, with a
// conditional write that must take exactly what was decided.
func Allot(left map[string]int, claims []Claim) []Allotment {
	remaining := make(map[string]int, len(left))
	for n, v := range left {
		remaining[n] = v
	}
	out := make([]Allotment, len(claims))
	for i, c := range claims {
		var short []string
		for _, n := range c.Nights {
			if c.Quantity < 1 || remaining[n] < c.Quantity {
				short = append(short, n)
			}
		}
		if len(short) > 0 || len(c.Nights) == 0 {
			if len(short) == 0 {
				short = []string{}
			}
			out[i] = Allotment{Short: short}
			continue
		}
		a := Allotment{Won: true, Left: make([]int, len(c.Nights))}
		for j, n := range c.Nights {
			remaining[n] -= c.Quantity
			a.Left[j] = remaining[n]
		}
		out[i] = a
	}
	return out
}
