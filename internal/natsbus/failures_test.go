package natsbus

import "testing"

// The counts stay bounded: past max, the oldest message loses its count
// (and gets its full budget again); the others keep theirs.
func TestFailureCountsAreBounded(t *testing.T) {
	t.Parallel()
	f := &failureCounts{max: 3}
	for _, seq := range []uint64{10, 11, 11, 12} {
		f.inc(seq)
	}
	if got := f.inc(13); got != 1 || len(f.n) != 3 {
		t.Fatalf("inc(13) = %d with %d counts, want 1 with 3", got, len(f.n))
	}
	if _, ok := f.n[10]; ok {
		t.Fatal("the oldest count (seq 10) survived past the bound")
	}
	if got := f.inc(11); got != 3 {
		t.Fatalf("seq 11 counted %d failures, want 3: a known message keeps its count", got)
	}
	f.inc(5) // older than every counted message, and still counted
	if len(f.n) != 3 || f.n[5] != 1 {
		t.Fatalf("counts %v, want 3 of them including seq 5", f.n)
	}
	f.forget(5)
	if len(f.n) != 2 {
		t.Fatalf("counts %v after forget", f.n)
	}
}
