package auth

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/golang-jwt/jwt/v5"
)

const secret = "0123456789abcdef0123456789abcdef"

func TestMintVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	tk, err := New(secret)
	if err != nil {
		t.Fatal(err)
	}
	p := berth.Principal{Subject: "s1", Role: berth.RoleStaff, Partitions: []string{"c1"}}
	tok, err := tk.Mint(p, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tk.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "s1" || got.Role != berth.RoleStaff || len(got.Partitions) != 1 || got.Partitions[0] != "c1" {
		t.Fatalf("got %+v", got)
	}
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	tk, _ := New(secret)
	other, _ := New(strings.Repeat("x", 32))
	good, _ := tk.Mint(berth.Principal{Subject: "g", Role: berth.RoleGuest}, time.Minute)
	past := &Tokens{secret: []byte(secret), now: func() time.Time { return time.Now().Add(-time.Hour) }}
	expired, _ := past.Mint(berth.Principal{Subject: "g", Role: berth.RoleGuest}, time.Minute)
	wrongKey, _ := other.Mint(berth.Principal{Subject: "g", Role: berth.RoleGuest}, time.Minute)
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "g", "role": "admin", "exp": time.Now().Add(time.Hour).Unix()}).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "g", "role": "admin", "exp": time.Now().Add(time.Hour).Unix()}).
		SignedString([]byte(secret))
	noExp, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "g", "role": "admin"}).SignedString([]byte(secret))
	badRole, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "g", "role": "root", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	// Tamper: swap the payload for one claiming admin, keep the signature.
	parts := strings.Split(good, ".")
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"g","role":"admin","exp":9999999999}`))
	tampered := strings.Join(parts, ".")
	for name, tok := range map[string]string{
		"empty": "", "garbage": "not.a.jwt", "expired": expired, "wrong key": wrongKey, "alg none": none,
		"alg HS512": hs512, "no exp": noExp, "unknown role": badRole, "tampered claims": tampered,
		"oversized": strings.Repeat("a", 10000),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if p, err := tk.Verify(tok); err == nil {
				t.Fatalf("Verify accepted %s token as %+v", name, p)
			}
		})
	}
}

func TestNewRejectsShortSecret(t *testing.T) {
	t.Parallel()
	if _, err := New("short"); err == nil {
		t.Fatal("New accepted a short secret")
	}
}
