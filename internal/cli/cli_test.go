package cli_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/cli"
	"github.com/spf13/cobra"
)

func TestExitCode(t *testing.T) {
	t.Parallel()
	usage := cli.Usage(errors.New("--region: required"))
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"failure", errors.New("boom"), 1},
		{"usage", usage, 2},
		{"wrapped usage", fmt.Errorf("serve: %w", usage), 2},
		{"joined usage", errors.Join(errors.New("x"), usage), 2},
	} {
		if got := cli.ExitCode(tc.err); got != tc.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
	if usage.Error() != "--region: required" {
		t.Errorf("a usage error reads %q, want its cause", usage.Error())
	}
}

// TestLocalEnvReadsTheStackFile: an operator's verb run anywhere under the
// repository after `make up` gets the file's settings; the environment wins.
func TestLocalEnvReadsTheStackFile(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644))
	must(os.MkdirAll(filepath.Join(root, ".local"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "cmd", "tool"), 0o755))
	must(os.WriteFile(filepath.Join(root, ".local", "env"),
		[]byte("export BERTH_CLI_TEST_URL='postgres://from-file'\nexport BERTH_CLI_TEST_KEPT='from-file'\n"), 0o600))
	t.Setenv("BERTH_CLI_TEST_URL", "")
	os.Unsetenv("BERTH_CLI_TEST_URL")
	t.Setenv("BERTH_CLI_TEST_KEPT", "from-environment")
	t.Chdir(filepath.Join(root, "cmd", "tool"))

	var stderr bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetErr(&stderr)
	if err := cli.LocalEnv(cmd, nil); err != nil {
		t.Fatal(err)
	}
	if got := os.Getenv("BERTH_CLI_TEST_URL"); got != "postgres://from-file" {
		t.Errorf("BERTH_CLI_TEST_URL = %q, want the file's value", got)
	}
	if got := os.Getenv("BERTH_CLI_TEST_KEPT"); got != "from-environment" {
		t.Errorf("BERTH_CLI_TEST_KEPT = %q, want the environment's value", got)
	}
	if !strings.Contains(stderr.String(), filepath.Join(".local", "env")) {
		t.Errorf("stderr %q does not name the file it read", stderr.String())
	}
}
