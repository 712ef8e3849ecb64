package scenario

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A typo stays inside one word: the words around it are the name's own,
// and the edited word is within the index's forgiveness of the original
// (one edit below eight letters, at most two from eight on).
func TestTypoEditsOneWord(t *testing.T) {
	for _, name := range []string{"new york", "frankfurt am main", "são paulo", "harbour", "zürich", "old town"} {
		orig := strings.Fields(name)
		for range 500 {
			got := strings.Fields(typo(name))
			if len(got) != len(orig) {
				t.Fatalf("typo(%q) = %q: the words changed in number", name, got)
			}
			changed := 0
			for i := range got {
				if got[i] == orig[i] {
					continue
				}
				changed++
				n := utf8.RuneCountInString(orig[i])
				d := utf8.RuneCountInString(got[i]) - n
				if d < -2 || d > 2 || (n < 8 && (d < -1 || d > 1)) {
					t.Fatalf("typo(%q) = %q: word %q became %q", name, got, orig[i], got[i])
				}
			}
			if changed != 1 {
				t.Fatalf("typo(%q) = %q: %d words edited, want 1", name, got, changed)
			}
		}
	}
}
