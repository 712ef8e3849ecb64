package localenv_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/localenv"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     [][2]string
		wantErr  bool
	}{
		{"stack script", "# comment\n\nexport A='postgres://u@h:1/db?x=y'\nexport B='us-east=http://h:1,eu=http://h:2'\n",
			[][2]string{{"A", "postgres://u@h:1/db?x=y"}, {"B", "us-east=http://h:1,eu=http://h:2"}}, false},
		{"bare and double quoted", `C=plain` + "\n" + `D="say \"hi\""`, [][2]string{{"C", "plain"}, {"D", `say "hi"`}}, false},
		{"quote inside single quotes", `E='it'\''s'`, [][2]string{{"E", "it's"}}, false},
		{"empty value", "F=''", [][2]string{{"F", ""}}, false},
		{"no equals", "export G", nil, true},
		{"bad name", "1X=y", nil, true},
		{"unterminated", "H='x", nil, true},
		{"two words", "I=a b", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := localenv.Parse(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && !equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func equal(a, b [][2]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Load walks up from a subdirectory to the file at the root, and never
// overrides a variable the environment already has.
func TestLoadWalksUpAndKeepsTheEnvironment(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "loadtest", "internal")
	if err := os.MkdirAll(filepath.Join(root, ".local"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"go.mod":     "module example\n",
		localenv.Rel: "export LOCALENV_TEST_A='from-file'\nexport LOCALENV_TEST_B='from-file'\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("LOCALENV_TEST_B", "from-env")
	os.Unsetenv("LOCALENV_TEST_A")
	t.Cleanup(func() { os.Unsetenv("LOCALENV_TEST_A") })
	path, err := localenv.Load(sub)
	if err != nil || path != filepath.Join(root, localenv.Rel) {
		t.Fatalf("Load = %q, %v", path, err)
	}
	if a, b := os.Getenv("LOCALENV_TEST_A"), os.Getenv("LOCALENV_TEST_B"); a != "from-file" || b != "from-env" {
		t.Fatalf("A=%q B=%q, want from-file and from-env", a, b)
	}
}

// The walk stops at the repository root: a file above it is not ours.
func TestFindStopsAtTheRoot(t *testing.T) {
	t.Parallel()
	outer := t.TempDir()
	root := filepath.Join(outer, "repo")
	if err := os.MkdirAll(filepath.Join(outer, ".local"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(outer, localenv.Rel), []byte("X=1\n"), 0o644)
	_ = os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example\n"), 0o644)
	if p, ok := localenv.Find(root); ok {
		t.Fatalf("found %s above the repository root", p)
	}
}
