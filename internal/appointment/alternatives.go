package appointment

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strings"
	"time"
)

const (
	// AlternativesOffered is how many open slots a 409 slot_taken offers.
	AlternativesOffered = 3
	// AlternativeBucket is how many nearby open slots each offered
	// alternative is chosen among.
	AlternativeBucket = 4
	// AlternativeCandidates is how many open slots on each side of the
	// asked instant the store reads to choose from.
	AlternativeCandidates = AlternativesOffered * AlternativeBucket
)

// SpreadAlternatives chooses the slots a 409 slot_taken offers guestID,
// from open slots of one doctor, asked around the instant around.
//
// Everyone who loses one slot used to be offered the same three nearest
// slots, so they all took the first and collided again (a clinic opening
// booked 374 of 480 slots that way). Instead the open slots, nearest to
// around first, are cut into AlternativesOffered time buckets of up to
// AlternativeBucket slots; the i-th alternative is the member of the i-th
// bucket the guest's hash ranks first (rendezvous hashing on guest and
// slot, so a slot leaving a bucket moves only the guests who ranked it
// first). The answer stays nearest first by bucket, and the losers of one
// slot spread over its bucket instead of piling onto one slot. With at
// most AlternativesOffered open slots they are all offered, nearest first.
// It is deterministic: a guest asking twice in the same state is offered
// the same slots.
func SpreadAlternatives(guestID string, around time.Time, open []Slot) []Slot {
	dist := func(t time.Time) time.Duration { return max(t.Sub(around), around.Sub(t)) }
	cands := slices.Clone(open)
	slices.SortStableFunc(cands, func(a, b Slot) int {
		if c := cmp.Compare(dist(a.StartsAt), dist(b.StartsAt)); c != 0 {
			return c
		}
		if c := a.StartsAt.Compare(b.StartsAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(cands) <= AlternativesOffered {
		return cands
	}
	size := min(AlternativeBucket, len(cands)/AlternativesOffered)
	out := make([]Slot, 0, AlternativesOffered)
	for i := range AlternativesOffered {
		bucket := cands[i*size : (i+1)*size]
		best, bestRank := bucket[0], rank(guestID, bucket[0].ID)
		for _, s := range bucket[1:] {
			if r := rank(guestID, s.ID); r < bestRank {
				best, bestRank = s, r
			}
		}
		out = append(out, best)
	}
	return out
}

// rank is the guest's pseudo-random preference for a slot.
func rank(guestID, slotID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(guestID))
	h.Write([]byte{0})
	h.Write([]byte(slotID))
	// FNV alone ranks ids differing in their last bytes in a lopsided
	// order; the splitmix64 finalizer spreads them evenly.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
