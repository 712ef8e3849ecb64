package txcost

import (
	"strings"
	"testing"
)

var minimalBound = map[string]bool{"h": true, "t": true, "d": true, "n": true}

// pgbench must run the same statements as the Go driver: every $n becomes
// the variable the step names, and nothing else changes.
func TestPgbenchScriptNamesEveryArgument(t *testing.T) {
	t.Parallel()
	for _, hot := range []bool{false, true} {
		sc := minimalScript(hot)
		got, err := pgbenchScript(sc, "\\set h 1\n", "", minimalBound)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, "$") {
			t.Errorf("hot=%v: a placeholder was left:\n%s", hot, got)
		}
		lines := strings.Split(strings.TrimSpace(got), "\n")
		if lines[1] != "BEGIN;" || lines[len(lines)-1] != "COMMIT;" || len(lines) != len(sc.Trips)+3 {
			t.Errorf("hot=%v: want header, BEGIN, %d statements, COMMIT:\n%s", hot, len(sc.Trips), got)
		}
		if !strings.Contains(got, "WHERE hotel_id = :h AND room_type_id = :t") || !strings.Contains(got, "+ :d::int + :n::int") {
			t.Errorf("hot=%v: arguments not named:\n%s", hot, got)
		}
	}
	bad := minimalScript(false)
	bad.Trips[0].Steps[0].Args = bad.Trips[0].Steps[0].Args[:2]
	if _, err := pgbenchScript(bad, "", "", minimalBound); err == nil {
		t.Error("a $n without an argument name rendered without error")
	}
	if _, err := pgbenchScript(minimalScript(false), "", "", map[string]bool{"h": true, "t": true, "d": true}); err == nil {
		t.Error("an argument bound by nothing (n) rendered without error")
	}
}
