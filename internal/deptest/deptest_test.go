package deptest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/berthhq/berth/"

// domain packages hold business rules: the standard library only, and not
// even net/http (an HTTP status is the edge's business). A domain package
// may import another domain package.
var domain = []string{
	"internal/berth",
	"internal/reservation",
	"internal/appointment",
	"internal/placement",
	"internal/soldout",
	"internal/waitlist",
}

// edge packages must not reach the database driver, its migrations or its
// retry library, directly or through anything they import. The read model's
// projector and API reach their store through readmodel.Store, and
// telemetry hands postgres its providers rather than building the driver's
// tracer itself.
var edge = []string{
	"internal/auth",
	"internal/events",
	"internal/httpapi",
	"internal/natsbus",
	"internal/notify",
	"internal/payments",
	"internal/ratelimit",
	"internal/readmodel",
	"internal/rediscache",
	"internal/router",
	"internal/search",
	"internal/searchindex",
	"internal/telemetry",
	"internal/view",
	"internal/waitingroom",
	"internal/walk",
}

// driver is what "the database driver" means: a dependency whose import
// path starts with one of these.
var driver = []string{
	"github.com/jackc/",
	"github.com/pressly/goose",
	"github.com/cockroachdb/cockroach-go",
	"github.com/exaring/otelpgx",
	module + "internal/postgres",
	module + "internal/dbtest",
}

// deps returns, for each named package, every package it pulls in
// (Go's .Deps: the transitive closure, test files excluded).
func deps(t *testing.T, names []string) map[string][]string {
	t.Helper()
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	for _, n := range names {
		args = append(args, module+n)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[strings.TrimPrefix(f[0], module)] = f[1:]
	}
	if len(m) != len(names) {
		t.Fatalf("go list answered for %d packages, want %d:\n%s", len(m), len(names), out)
	}
	return m
}

// standard reports whether path is in the standard library: its first
// element has no dot (the rule the go command itself uses).
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func TestDomainPackagesUseOnlyTheStandardLibrary(t *testing.T) {
	allowed := map[string]bool{}
	for _, d := range domain {
		allowed[module+d] = true
	}
	for name, ds := range deps(t, domain) {
		for _, d := range ds {
			switch {
			case d == "net/http" || strings.HasPrefix(d, "net/http/"):
				t.Errorf("%s pulls in %s: HTTP belongs to the edge", name, d)
			case !standard(d) && !allowed[d]:
				t.Errorf("%s pulls in %s: a domain package needs the standard library only", name, d)
			}
		}
	}
}

func TestEdgePackagesDoNotReachTheDatabaseDriver(t *testing.T) {
	for name, ds := range deps(t, edge) {
		for _, d := range ds {
			for _, bad := range driver {
				if strings.HasPrefix(d, bad) {
					t.Errorf("%s pulls in %s: only the postgres adapter talks to the database", name, d)
				}
			}
		}
	}
}
