package auth

import (
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
)

// TestMintWritesWhatTheLibraryWrites: the hand-written mint gives the jwt
// library's token byte for byte — plain ids, partitions (none, empty, some),
// strings encoding/json escapes, and instants off the whole second.
func TestMintWritesWhatTheLibraryWrites(t *testing.T) {
	t.Parallel()
	tk, err := New(secret, WithMaxLifetime(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	principals := []berth.Principal{
		{Subject: "g", Role: berth.RoleGuest},
		{Subject: "base-0123456789ab", Role: berth.RoleGuest},
		{Subject: "loadtest-admin", Role: berth.RoleAdmin},
		{Subject: "s1", Role: berth.RoleStaff, Partitions: []string{"c1"}},
		{Subject: "s2", Role: berth.RoleStaff, Partitions: []string{"c1", "0b9e8f1a-5c1d-4b0e-9f7a-2d3c4b5a6978"}},
		{Subject: "s3", Role: berth.RoleStaff, Partitions: []string{}},
		{Subject: `quote " back \ slash`, Role: berth.RoleGuest},
		{Subject: "<script>&amp;", Role: berth.RoleGuest, Partitions: []string{"a<b", "c&d"}},
		{Subject: "tab\tnew\nline\x00nul", Role: berth.RoleOps},
		{Subject: "Zoë 東京 \u2028 \u2029", Role: berth.RoleGuest},
		{Subject: "bad utf8 \xff\xfe", Role: berth.RoleGuest},
	}
	instants := []time.Time{
		time.Unix(1800000000, 0),
		time.Unix(1800000000, 999_999_999),
		time.Date(2026, 12, 1, 14, 39, 47, 123_456_789, time.UTC),
		time.Date(2026, 12, 1, 14, 39, 47, 500_000_000, time.FixedZone("x", 5*3600+1800)),
	}
	for _, p := range principals {
		for _, now := range instants {
			for _, ttl := range []time.Duration{time.Minute, 1500 * time.Millisecond, 12 * time.Hour, 47 * time.Hour} {
				want, err := tk.mintLibrary(p, now, ttl)
				if err != nil {
					t.Fatal(err)
				}
				if got := tk.mintFast(p, now, ttl); got != want {
					t.Errorf("%+v at %s for %s:\n hand    %s\n library %s", p, now, ttl, got, want)
				}
			}
		}
	}
}

// TestMintReusesNoState: tokens minted one after another (the keyed HMAC
// states come back from the pool) each verify, and differ per subject.
func TestMintReusesNoState(t *testing.T) {
	t.Parallel()
	tk, _ := New(secret)
	seen := map[string]bool{}
	for i := range 200 {
		sub := "guest-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		tok, err := tk.Mint(berth.Principal{Subject: sub, Role: berth.RoleGuest}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if seen[tok] {
			t.Fatalf("token %d minted twice", i)
		}
		seen[tok] = true
		p, err := tk.Verify(tok)
		if err != nil || p.Subject != sub {
			t.Fatalf("token %d: %+v, %v", i, p, err)
		}
	}
}
