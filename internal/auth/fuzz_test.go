package auth

import (
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
)

// FuzzVerify feeds arbitrary bearer tokens to the verifier: it never panics,
// and anything it accepts carries a subject and a known role and stops
// verifying when its signature is altered.
func FuzzVerify(f *testing.F) {
	tk, _ := New(secret)
	good, _ := tk.Mint(berth.Principal{Subject: "g", Role: berth.RoleGuest}, time.Hour)
	staff, _ := tk.Mint(berth.Principal{Subject: "s", Role: berth.RoleStaff, Partitions: []string{"c1"}}, time.Hour)
	for _, s := range []string{good, staff, "", "a.b.c", good + "x", strings.ToUpper(good),
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJnIiwicm9sZSI6ImFkbWluIn0."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		p, err := tk.Verify(token)
		if err != nil {
			return
		}
		if p.Subject == "" || !p.Role.Valid() {
			t.Fatalf("accepted %q as %+v", token, p)
		}
		i := strings.LastIndexByte(token, '.')
		if i < 0 || i == len(token)-1 {
			t.Fatalf("accepted a token without a signature: %q", token)
		}
		sig := []byte(token[i+1:])
		sig[0] ^= 0x01
		if _, err := tk.Verify(token[:i+1] + string(sig)); err == nil {
			t.Fatalf("a token with an altered signature still verifies: %q", token)
		}
	})
}
