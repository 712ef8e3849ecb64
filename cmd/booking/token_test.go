package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/cli"
)

// Finding 8 of issue 13: `booking token` mints only within
// BERTH_TOKEN_MAX_TTL (the local stack once minted 720 h tokens); a longer
// --ttl, or a bad maximum, is a usage error (exit 2) naming what to fix.
func TestTokenCommandHonoursMaxTTL(t *testing.T) {
	t.Setenv("BERTH_TOKEN_SECRET", bookingtest.Secret)
	mint := func(args ...string) (string, error) {
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"token", "--sub", "dev-admin", "--role", "admin"}, args...))
		err := cmd.Execute()
		return strings.TrimSpace(out.String()), err
	}
	t.Setenv("BERTH_TOKEN_MAX_TTL", "")
	if _, err := mint("--ttl", "720h"); err == nil || cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "BERTH_TOKEN_MAX_TTL") {
		t.Fatalf("--ttl 720h under the default maximum: %v (exit %d), want a usage error naming BERTH_TOKEN_MAX_TTL", err, cli.ExitCode(err))
	}
	tok, err := mint("--ttl", "12h")
	if err != nil {
		t.Fatalf("--ttl 12h: %v", err)
	}
	tokens, _ := auth.New(bookingtest.Secret)
	if _, err := tokens.Verify(tok); err != nil {
		t.Fatalf("a minted token does not verify: %v", err)
	}
	t.Setenv("BERTH_TOKEN_MAX_TTL", "48h")
	if _, err := mint("--ttl", "36h"); err != nil {
		t.Fatalf("--ttl 36h under a 48h maximum: %v", err)
	}
	for _, bad := range []string{"soon", "0s", "8000h"} {
		t.Setenv("BERTH_TOKEN_MAX_TTL", bad)
		if _, err := mint("--ttl", "1h"); err == nil || cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "BERTH_TOKEN_MAX_TTL") {
			t.Fatalf("BERTH_TOKEN_MAX_TTL=%s: %v, want a usage error naming it", bad, err)
		}
	}
}
