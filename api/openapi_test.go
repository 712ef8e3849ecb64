package api_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/berthhq/berth/api"
	"sigs.k8s.io/yaml"
)

// apiMDPath is where the contract lives: docs/API.md in this repository.
func apiMDPath() string {
	return filepath.Join("..", "docs", "API.md")
}

// readAPIMD returns docs/API.md; a missing contract fails the test.
func readAPIMD(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(apiMDPath())
	if err != nil {
		t.Fatalf("read API.md: %v", err)
	}
	return string(b)
}

type (
	obj = map[string]any
	arr = []any
)

// spec is the parsed api/openapi.yaml.
type spec struct {
	root obj
}

func loadSpec(t *testing.T) spec {
	t.Helper()
	var root obj
	if err := yaml.Unmarshal(api.OpenAPI, &root); err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	return spec{root: root}
}

// pointer resolves a local JSON pointer such as "#/components/schemas/Problem".
func (s spec) pointer(ref string) (any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("%q is not a local reference", ref)
	}
	var cur any = s.root
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(obj)
		if !ok {
			return nil, fmt.Errorf("%q: %q is not inside an object", ref, tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("%q: no %q", ref, tok)
		}
	}
	return cur, nil
}

// deref follows $ref chains of v (a response, parameter, …).
func (s spec) deref(t *testing.T, v any) obj {
	t.Helper()
	for range 20 {
		m, ok := v.(obj)
		if !ok {
			t.Fatalf("want an object, got %T", v)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		if v, _ = s.pointer(ref); v == nil {
			t.Fatalf("unresolvable $ref %q", ref)
		}
	}
	t.Fatal("$ref chain too long")
	return nil
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// operation is one (method, path) of the spec.
type operation struct {
	method, path string
	op           obj
	pathItem     obj
}

func (o operation) String() string { return strings.ToUpper(o.method) + " " + o.path }

func (s spec) operations(t *testing.T) []operation {
	t.Helper()
	paths, ok := s.root["paths"].(obj)
	if !ok || len(paths) == 0 {
		t.Fatal("spec has no paths")
	}
	var ops []operation
	for p, item := range paths {
		pi := s.deref(t, item)
		for _, m := range httpMethods {
			if op, ok := pi[m].(obj); ok {
				ops = append(ops, operation{method: m, path: p, op: op, pathItem: pi})
			}
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].String() < ops[j].String() })
	return ops
}

// parameters returns the path-level and operation-level parameters of o,
// resolved, the operation's overriding the path's.
func (s spec) parameters(t *testing.T, o operation) map[string]obj {
	t.Helper()
	out := map[string]obj{}
	for _, src := range []any{o.pathItem["parameters"], o.op["parameters"]} {
		list, _ := src.(arr)
		for _, p := range list {
			param := s.deref(t, p)
			in, _ := param["in"].(string)
			name, _ := param["name"].(string)
			if in == "header" {
				name = http.CanonicalHeaderKey(name)
			}
			out[in+":"+name] = param
		}
	}
	return out
}

func TestOpenAPIVersion(t *testing.T) {
	s := loadSpec(t)
	v, _ := s.root["openapi"].(string)
	if !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(v) {
		t.Fatalf("openapi = %q, want 3.1.x", v)
	}
	for _, k := range []string{"info", "paths", "components"} {
		if _, ok := s.root[k].(obj); !ok {
			t.Errorf("missing top-level %q", k)
		}
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	s := loadSpec(t)
	var n int
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case obj:
			if ref, ok := v["$ref"]; ok {
				n++
				r, isString := ref.(string)
				if !isString {
					t.Errorf("%s: $ref is %T, want a string", where, ref)
				} else if _, err := s.pointer(r); err != nil {
					t.Errorf("%s: %v", where, err)
				}
			}
			for k, e := range v {
				walk(where+"/"+k, e)
			}
		case arr:
			for i, e := range v {
				walk(where+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("#", s.root)
	if n == 0 {
		t.Error("no $ref at all: the shared components are not used")
	}
}

func TestOpenAPIOperations(t *testing.T) {
	s := loadSpec(t)
	schemes := obj{}
	if c, ok := s.root["components"].(obj); ok {
		schemes, _ = c["securitySchemes"].(obj)
	}
	for _, want := range []string{"bearerAuth", "partnerApiKey"} {
		if _, ok := schemes[want]; !ok {
			t.Errorf("components.securitySchemes lacks %s", want)
		}
	}
	ids := map[string]string{}
	pathParam := regexp.MustCompile(`\{([^}]+)\}`)
	for _, o := range s.operations(t) {
		id, _ := o.op["operationId"].(string)
		switch {
		case id == "":
			t.Errorf("%s: no operationId", o)
		case ids[id] != "":
			t.Errorf("%s: operationId %q already used by %s", o, id, ids[id])
		default:
			ids[id] = o.String()
		}

		// Security: explicit on every operation, naming known schemes only.
		sec, ok := o.op["security"].(arr)
		if !ok {
			t.Errorf("%s: no explicit security (use [] for public operations)", o)
		}
		for _, req := range sec {
			for name := range req.(obj) {
				if _, ok := schemes[name]; !ok {
					t.Errorf("%s: unknown security scheme %q", o, name)
				}
			}
		}

		// Every {param} of the path is declared as a required path parameter.
		params := s.parameters(t, o)
		for _, m := range pathParam.FindAllStringSubmatch(o.path, -1) {
			p, ok := params["path:"+m[1]]
			if !ok {
				t.Errorf("%s: path parameter %q is not declared", o, m[1])
			} else if req, _ := p["required"].(bool); !req {
				t.Errorf("%s: path parameter %q must be required", o, m[1])
			}
		}

		responses, _ := o.op["responses"].(obj)
		if len(responses) == 0 {
			t.Errorf("%s: no responses", o)
		}
		for code, r := range responses {
			resp := s.deref(t, r)
			if d, _ := resp["description"].(string); d == "" {
				t.Errorf("%s %s: response has no description", o, code)
			}
			if !isErrorStatus(code) {
				continue
			}
			content, _ := resp["content"].(obj)
			if len(content) == 0 {
				t.Errorf("%s %s: error response has no content", o, code)
			}
			for mt, media := range content {
				if mt != "application/problem+json" {
					t.Errorf("%s %s: error media type %q, want application/problem+json", o, code, mt)
				}
				schema, _ := media.(obj)["schema"].(obj)
				if ref, _ := schema["$ref"].(string); ref != "#/components/schemas/Problem" {
					t.Errorf("%s %s: error schema %v, want $ref to #/components/schemas/Problem", o, code, schema)
				}
			}
		}
	}
}

func isErrorStatus(code string) bool {
	if code == "default" || code == "4XX" || code == "5XX" {
		return true
	}
	n, err := strconv.Atoi(code)
	return err == nil && n >= 400
}

// TestOpenAPIIdempotencyKey: every POST that creates or changes a
// reservation or appointment requires Idempotency-Key (≤ 64 characters).
func TestOpenAPIIdempotencyKey(t *testing.T) {
	s := loadSpec(t)
	var n int
	for _, o := range s.operations(t) {
		if o.method != "post" || !(strings.Contains(o.path, "/reservations") || strings.Contains(o.path, "/appointments")) {
			continue
		}
		n++
		p, ok := s.parameters(t, o)["header:Idempotency-Key"]
		if !ok {
			t.Errorf("%s: no Idempotency-Key header parameter", o)
			continue
		}
		if req, _ := p["required"].(bool); !req {
			t.Errorf("%s: Idempotency-Key must be required", o)
		}
		schema, _ := p["schema"].(obj)
		if max, _ := schema["maxLength"].(float64); max != 64 {
			t.Errorf("%s: Idempotency-Key maxLength = %v, want 64", o, schema["maxLength"])
		}
		responses, _ := o.op["responses"].(obj)
		for code, r := range responses {
			if isErrorStatus(code) {
				continue
			}
			headers, _ := s.deref(t, r)["headers"].(obj)
			if _, ok := headers["Idempotent-Replayed"]; !ok {
				t.Errorf("%s %s: no Idempotent-Replayed header", o, code)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no reservation or appointment POST")
	}
}

// endpoint is "METHOD /path" with parameter names erased: "/v1/hotels/{}".
type endpoint string

var paramName = regexp.MustCompile(`\{[^}]*\}`)

func normalise(method, path string) endpoint {
	return endpoint(strings.ToUpper(method) + " " + paramName.ReplaceAllString(path, "{}"))
}

// mdEndpoint matches "`GET /v1/...`" and "`POST …/appointments/...`" in API.md.
var mdEndpoint = regexp.MustCompile("`(GET|PUT|POST|PATCH|DELETE) ((?:/|…|\\.\\.\\.)[^`]*)`")

// apiMDEndpoints extracts the endpoints API.md names. Query strings and
// optional parts ("?…", "[&…]") are dropped, and an elided path
// ("…/appointments/{id}/confirm") is completed from the latest full path
// that has its first segment ("/v1/clinics/{clinic_id}" + "/appointments/…").
func apiMDEndpoints(t *testing.T, md string) map[endpoint]string {
	t.Helper()
	out := map[endpoint]string{}
	var last []string // segments of the latest full path
	for i, line := range strings.Split(md, "\n") {
		for _, m := range mdEndpoint.FindAllStringSubmatch(line, -1) {
			method, path := m[1], m[2]
			if j := strings.IndexAny(path, "?[ "); j >= 0 {
				path = path[:j]
			}
			if rest, ok := cutElision(path); ok {
				segs := strings.Split(strings.Trim(rest, "/"), "/")
				k := slices.Index(last, segs[0])
				if k < 0 {
					t.Fatalf("API.md line %d: cannot complete %q from the previous path /%s", i+1, m[2], strings.Join(last, "/"))
				}
				path = "/" + strings.Join(append(slices.Clone(last[:k]), segs...), "/")
			} else {
				last = strings.Split(strings.Trim(path, "/"), "/")
			}
			out[normalise(method, path)] = fmt.Sprintf("line %d: %s", i+1, m[0])
		}
	}
	return out
}

func cutElision(path string) (string, bool) {
	for _, e := range []string{"…", "..."} {
		if rest, ok := strings.CutPrefix(path, e); ok {
			return rest, true
		}
	}
	return path, false
}

func TestOpenAPIMatchesAPIMD(t *testing.T) {
	md := readAPIMD(t)
	want := apiMDEndpoints(t, md)
	if len(want) < 10 {
		t.Fatalf("found only %d endpoints in API.md; has its format changed?", len(want))
	}
	got := map[endpoint]string{}
	for _, o := range loadSpec(t).operations(t) {
		got[normalise(o.method, o.path)] = o.String()
	}
	for e, where := range want {
		if _, ok := got[e]; !ok {
			t.Errorf("API.md names %s (%s) but openapi.yaml does not", e, where)
		}
	}
	for e, op := range got {
		if _, ok := want[e]; !ok {
			t.Errorf("openapi.yaml has %s, which API.md does not name", op)
		}
	}
}

// mdCode matches a row of API.md's error table: "| `sold_out` | 409 | …".
var mdCode = regexp.MustCompile("^\\|\\s*`([a-z_]+)`\\s*\\|\\s*(\\d{3})\\s*\\|")

func TestOpenAPIProblemCodesMatchAPIMD(t *testing.T) {
	md := readAPIMD(t)
	s := loadSpec(t)
	statusOf := map[string]string{}
	for _, line := range strings.Split(md, "\n") {
		if m := mdCode.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			statusOf[m[1]] = m[2]
		}
	}
	if len(statusOf) == 0 {
		t.Fatal("found no error codes in API.md's table; has its format changed?")
	}

	problem, err := s.pointer("#/components/schemas/Problem")
	if err != nil {
		t.Fatal(err)
	}
	props, _ := problem.(obj)["properties"].(obj)
	for _, f := range []string{"type", "title", "status", "detail", "code", "errors", "nights", "alternatives", "home_region"} {
		if _, ok := props[f]; !ok {
			t.Errorf("Problem lacks property %q", f)
		}
	}
	codeSchema := s.deref(t, props["code"])
	enum, _ := codeSchema["enum"].(arr)
	var got, want []string
	for _, c := range enum {
		got = append(got, fmt.Sprint(c))
	}
	for c := range statusOf {
		want = append(want, c)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("Problem.code enum = %v\nAPI.md table      = %v", got, want)
	}

	// Every status of the table is answered by at least one operation.
	used := map[string]bool{}
	for _, o := range s.operations(t) {
		for code := range o.op["responses"].(obj) {
			used[code] = true
		}
	}
	for c, status := range statusOf {
		if !used[status] {
			t.Errorf("no operation declares %s, the status of %s", status, c)
		}
	}
}
