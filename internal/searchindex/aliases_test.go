package searchindex

import (
	"testing"

	"github.com/berthhq/berth/internal/search"
)

// Every name of the exonym table belongs to one city: a name in two groups
// would send one city's searches to the other's hotels.
func TestCityNamesAreUnambiguous(t *testing.T) {
	group := map[string]int{}
	for i, g := range cityNames {
		if len(g) < 2 {
			t.Errorf("group %d %v: a city with no other name", i, g)
		}
		for _, name := range g {
			k := search.FoldCity(name)
			if j, ok := group[k]; ok && j != i {
				t.Errorf("%q is in %v and %v", name, cityNames[j], g)
			}
			group[k] = i
		}
	}
	if got := aliasesOf("MUNICH"); len(got) == 0 || got[0] != "München" {
		t.Errorf("aliasesOf(MUNICH) = %v", got)
	}
	if got := aliasesOf("Atlantis"); got != nil {
		t.Errorf("aliasesOf(Atlantis) = %v, want none", got)
	}
}
