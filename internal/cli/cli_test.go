package cli_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/berthhq/berth/internal/cli"
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
