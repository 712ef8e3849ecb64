package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A negative --settle is refused before a rush reaches for the platform
// (none runs here: reaching for it would fail on /healthz instead).
func TestRushesRefuseANegativeSettle(t *testing.T) {
	for name, cmd := range map[string]*cobra.Command{"flash-sale": flashSaleCmd(), "clinic-opening": clinicOpeningCmd()} {
		cmd.SetArgs([]string{"--settle", "-1s"})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--settle -1s: want 0 or more") {
			t.Errorf("%s --settle -1s: err %v, want the --settle refusal", name, err)
		}
	}
}
