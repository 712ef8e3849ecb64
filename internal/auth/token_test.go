package auth

import (
	"encoding/base64"
	"fmt"
	"reflect"
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
	past := &Tokens{secret: []byte(secret), now: func() time.Time { return time.Now().Add(-time.Hour) }, maxLifetime: DefaultMaxLifetime}
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

// signed signs raw JSON claims with HS256 and secret, as an attacker holding
// a token of ours (or a careless minting tool) could produce them.
func signed(t *testing.T, claimsJSON string) string {
	t.Helper()
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	body := base64.RawURLEncoding.EncodeToString([]byte(claimsJSON))
	sig, err := jwt.SigningMethodHS256.Sign(head+"."+body, []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return head + "." + body + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// Finding 8 of issue 13: a token whose iat or nbf lies in the future beyond
// the leeway, whose exp is not a number, or whose lifetime exceeds the
// configured maximum does not verify; Mint refuses such a lifetime too.
func TestLifetimeLimits(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tk, err := New(secret, WithMaxLifetime(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	tk.now = func() time.Time { return now }
	at := func(d time.Duration) string { return fmt.Sprint(now.Add(d).Unix()) }
	claims := func(extra string) string { return `{"sub":"g","role":"guest"` + extra + `}` }
	for name, tc := range map[string]struct {
		claims string
		ok     bool
	}{
		"within the limits":          {claims(`,"iat":` + at(0) + `,"exp":` + at(time.Hour)), true},
		"exactly the maximum":        {claims(`,"iat":` + at(0) + `,"exp":` + at(24*time.Hour)), true},
		"iat within the leeway":      {claims(`,"iat":` + at(20*time.Second) + `,"exp":` + at(time.Hour)), true},
		"iat in the future":          {claims(`,"iat":` + at(10*time.Minute) + `,"exp":` + at(time.Hour)), false},
		"nbf in the future":          {claims(`,"iat":` + at(0) + `,"nbf":` + at(10*time.Minute) + `,"exp":` + at(time.Hour)), false},
		"exp as a string":            {claims(`,"iat":` + at(0) + `,"exp":"` + at(time.Hour) + `"`), false},
		"iat as a string":            {claims(`,"iat":"` + at(0) + `","exp":` + at(time.Hour)), false},
		"nbf as a string":            {claims(`,"iat":` + at(0) + `,"nbf":"` + at(0) + `","exp":` + at(time.Hour)), false},
		"exp as a boolean":           {claims(`,"iat":` + at(0) + `,"exp":true`), false},
		"a 720 h lifetime":           {claims(`,"iat":` + at(0) + `,"exp":` + at(720*time.Hour)), false},
		"a lifetime from a past iat": {claims(`,"iat":` + at(-48*time.Hour) + `,"exp":` + at(time.Hour)), false},
		"no iat, exp too far":        {claims(`,"exp":` + at(48*time.Hour)), false},
		"no iat, exp near":           {claims(`,"exp":` + at(time.Hour)), true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := tk.Verify(signed(t, tc.claims))
			if tc.ok && err != nil {
				t.Fatalf("refused %s: %v", tc.claims, err)
			}
			if !tc.ok && err == nil {
				t.Fatalf("accepted %s", tc.claims)
			}
		})
	}
	if _, err := tk.Mint(berth.Principal{Subject: "g", Role: berth.RoleGuest}, 25*time.Hour); err == nil {
		t.Fatal("Mint made a token longer than the maximum")
	}
	if _, err := tk.Mint(berth.Principal{Subject: "g", Role: berth.RoleGuest}, 0); err == nil {
		t.Fatal("Mint made a token that is expired when made")
	}
	if _, err := New(secret, WithMaxLifetime(time.Second)); err == nil {
		t.Fatal("New accepted a maximum lifetime of 1s")
	}
	if dflt, err := New(secret, WithMaxLifetime(0)); err != nil || dflt.MaxLifetime() != DefaultMaxLifetime {
		t.Fatalf("a zero maximum does not keep the default: %v", err)
	}
}

// TestMintedTokensReadByHand: what Mint issues takes the hand-read way
// (verify_fast.go) with the principal the library reads, and every token
// that way refuses still goes to the library, which refuses it.
func TestMintedTokensReadByHand(t *testing.T) {
	t.Parallel()
	tk, _ := New(secret)
	for _, p := range []berth.Principal{
		{Subject: "guest-1", Role: berth.RoleGuest},
		{Subject: "desk-1", Role: berth.RoleStaff, Partitions: []string{"c1", "c2"}},
		{Subject: "root", Role: berth.RoleAdmin},
	} {
		tok, err := tk.Mint(p, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := tk.verifyFast(tok)
		slow, err := tk.verifySlow(tok)
		if !ok || err != nil || !reflect.DeepEqual(fast, slow) || !reflect.DeepEqual(fast, p) {
			t.Fatalf("%+v: by hand %+v (%v), library %+v (%v)", p, fast, ok, slow, err)
		}
	}
	past := &Tokens{secret: []byte(secret), now: func() time.Time { return time.Now().Add(-time.Hour) }, maxLifetime: DefaultMaxLifetime}
	expired, _ := past.Mint(berth.Principal{Subject: "g", Role: berth.RoleGuest}, time.Minute)
	other, _ := New(strings.Repeat("x", 32))
	wrongKey, _ := other.Mint(berth.Principal{Subject: "g", Role: berth.RoleGuest}, time.Minute)
	long := &Tokens{secret: []byte(secret), now: time.Now, maxLifetime: 48 * time.Hour}
	tooLong, _ := long.Mint(berth.Principal{Subject: "g", Role: berth.RoleGuest}, 47*time.Hour)
	for name, tok := range map[string]string{"expired": expired, "wrong key": wrongKey, "beyond the maximum lifetime": tooLong} {
		if _, ok := tk.verifyFast(tok); ok {
			t.Fatalf("%s: read by hand", name)
		}
		if _, err := tk.Verify(tok); err == nil {
			t.Fatalf("%s: verified", name)
		}
	}
}
