package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// routePattern is a net/http.ServeMux pattern of the public API: a method
// and a path under /v1/. Operational routes (/healthz, /readyz, /metrics)
// are not part of the contract.
var routePattern = regexp.MustCompile(`^(GET|PUT|POST|DELETE|PATCH) (/v1/\S*)$`)

// servedRoutes returns every public route the services register — the
// string patterns given to a Handle or HandleFunc call in the non-test Go
// files of cmd/ and internal/ — with the files registering each.
func servedRoutes(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, root := range []string{filepath.Join("..", "cmd"), filepath.Join("..", "internal")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") {
					return true
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				pattern, err := strconv.Unquote(lit.Value)
				if err != nil || !routePattern.MatchString(pattern) {
					return true
				}
				rel, _ := filepath.Rel("..", path)
				out[pattern] = append(out[pattern], filepath.ToSlash(rel))
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}
	return out
}

// TestServedRoutesAreDocumented: the contract and the code name the same
// operations — every public route a service registers is in
// api/openapi.yaml (and so, by TestOpenAPIMatchesAPIMD, in docs/API.md), and
// every operation of the spec under /v1/ is served by some service. A handler added
// without its documentation, or a documented path nobody serves, fails here.
func TestServedRoutesAreDocumented(t *testing.T) {
	served := servedRoutes(t)
	if len(served) == 0 {
		t.Fatal("found no registered routes: the walk is broken")
	}
	documented := map[string]bool{}
	for _, o := range loadSpec(t).operations(t) {
		if routePattern.MatchString(o.String()) {
			documented[o.String()] = true
		}
	}
	var undocumented, unserved []string
	for r, files := range served {
		if !documented[r] {
			undocumented = append(undocumented, r+" ("+strings.Join(files, ", ")+")")
		}
	}
	for op := range documented {
		if _, ok := served[op]; !ok {
			unserved = append(unserved, op)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unserved)
	for _, r := range undocumented {
		t.Errorf("served but not in api/openapi.yaml: %s", r)
	}
	for _, op := range unserved {
		t.Errorf("in api/openapi.yaml but no service registers it: %s", op)
	}
}
