package main

import (
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/cli"
	"strings"
	"testing"
)

// The settings each part of the service reads are validated at start, and
// every error names the variable to fix.
func TestPartConfigNamesTheVariable(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		load func() error
		want []string
	}{
		{"clinics", map[string]string{"BERTH_SLOT_HOLD_TTL": "5", "BERTH_SLOT_WINDOW_WEEKS": "0", "BERTH_SLOT_MATERIALIZE_INTERVAL": "1ms"},
			func() error { _, err := loadClinicConfig(); return err },
			[]string{"BERTH_SLOT_HOLD_TTL", "BERTH_SLOT_WINDOW_WEEKS", "BERTH_SLOT_MATERIALIZE_INTERVAL"}},
		{"clinics out of range", map[string]string{"BERTH_SLOT_HOLD_TTL": "100ms", "BERTH_SLOT_WINDOW_WEEKS": "53"},
			func() error { _, err := loadClinicConfig(); return err },
			[]string{"BERTH_SLOT_HOLD_TTL", "BERTH_SLOT_WINDOW_WEEKS"}},
		{"cache", map[string]string{"BERTH_CACHE_TTL": "2h", "BERTH_CACHE_TIMEOUT": "soon", "BERTH_FOLLOWER_READS": "maybe"},
			func() error { _, err := loadCacheConfig(); return err },
			[]string{"BERTH_CACHE_TTL", "BERTH_CACHE_TIMEOUT", "BERTH_FOLLOWER_READS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			err := tc.load()
			if err == nil {
				t.Fatal("bad settings accepted")
			}
			for _, v := range tc.want {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("error does not name %s:\n%v", v, err)
				}
			}
		})
	}
	t.Run("defaults are valid", func(t *testing.T) {
		for _, v := range []string{"BERTH_SLOT_HOLD_TTL", "BERTH_SLOT_WINDOW_WEEKS", "BERTH_SLOT_MATERIALIZE_INTERVAL",
			"BERTH_CACHE_TTL", "BERTH_CACHE_TIMEOUT", "BERTH_FOLLOWER_READS"} {
			t.Setenv(v, "")
		}
		if _, err := loadClinicConfig(); err != nil {
			t.Errorf("clinic defaults: %v", err)
		}
		if _, err := loadCacheConfig(); err != nil {
			t.Errorf("cache defaults: %v", err)
		}
	})
}

// A usage error keeps exit code 2 when a caller wraps it.
func TestExitCodeOfWrappedUsageError(t *testing.T) {
	base := cli.Usage(errors.New("BERTH_REGION: required"))
	for err, want := range map[error]int{
		base:                               2,
		fmt.Errorf("serve: %w", base):      2,
		errors.New("database: no route"):   1,
		fmt.Errorf("x: %w", errViolations): 1,
	} {
		if got := cli.ExitCode(err); got != want {
			t.Errorf("cli.ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}
