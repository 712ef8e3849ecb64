// Package cli is what Berth's command-line tools share: the usage error that
// makes a command exit 2, and the exit code of an error, so every binary
// answers alike (0 done, 1 failed, 2 bad flags, arguments or settings).
package cli

import (
	"errors"
	"fmt"

	"github.com/berthhq/berth/internal/localenv"
	"github.com/spf13/cobra"
)

// UsageError marks bad flags, arguments or configuration.
type UsageError struct{ Err error }

// Usage marks err as a usage error: exit code 2, also when it arrives
// wrapped.
func Usage(err error) error { return UsageError{Err: err} }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ExitCode is the process exit code for err: 0 for nil, 2 for a usage error
// (wrapped or not), 1 for everything else.
func ExitCode(err error) int {
	var u UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// LocalEnv is the pre-run hook of the operators' verbs (booking verify,
// router shards, readmodel partners and verify): right after `make up` the
// database URL and the development secrets are in .local/env, so it reads
// that file when one is found from the working directory up to the
// repository root (variables already set win; see package localenv) and
// says so on stderr. In a deployment there is no such file and it does
// nothing.
func LocalEnv(cmd *cobra.Command, _ []string) error {
	path, err := localenv.Load(".")
	if err != nil {
		return err
	}
	if path != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "settings from", path)
	}
	return nil
}
