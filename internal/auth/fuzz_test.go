package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"reflect"
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

// FuzzVerifyFast signs arbitrary claims with the secret (under the header
// Mint writes, or another HS256 header) and checks the hand-read way never
// accepts a token the jwt library refuses, nor reads one differently; and
// that it does accept what Mint issues, so the comparison is not empty.
func FuzzVerifyFast(f *testing.F) {
	f.Add(`{"role":"guest","sub":"g","exp":1800003600,"iat":1800000000}`, int64(0), true)
	f.Add(`{"role":"staff","partitions":["c1","c2"],"sub":"s","exp":1800003600,"iat":1800000000}`, int64(10), true)
	f.Add(`{"role":"admin","partitions":[],"sub":"a","exp":1800003600}`, int64(0), true)
	f.Add(`{"role":"guest","sub":"g","exp":1800003600,"iat":1800000000,"nbf":1800000040}`, int64(0), true)
	f.Add(`{"role":"guest","sub":"g","exp":"1800003600"}`, int64(0), true)
	f.Add(`{"role":"guest","sub":"g","exp":1800003600.5}`, int64(0), true)
	f.Add(`{"role":"guest","sub":"g","exp":1800003600,"exp":1}`, int64(0), true)
	f.Add(`{"role":"guest","Sub":"g","exp":1800003600}`, int64(0), true)
	f.Add(`{"role":"guest","sub":"g\u0000","exp":1800003600}`, int64(0), true)
	f.Add(`{"role":"guest","sub":"g","exp":1800003600,"iat":1700000000}`, int64(0), true)
	f.Add(`{"role":"guest","sub":"g","exp":1800000020}`, int64(45), true)
	f.Add(`{"role":"guest","sub":"g","exp":1800003600,"iat":1800000031}`, int64(0), true)
	f.Add(`{"role":"guest","sub":"g","exp":1800003600}`, int64(0), false)
	base := time.Unix(1800000000, 0)
	f.Fuzz(func(t *testing.T, claimsJSON string, offset int64, minted bool) {
		now := base.Add(time.Duration(offset%100000) * time.Second)
		tk, _ := New(secret)
		tk.now = func() time.Time { return now }
		header := mintedHeader
		if !minted {
			header = base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"HS256"}`))
		}
		signed := header + "." + base64.RawURLEncoding.EncodeToString([]byte(claimsJSON))
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(signed))
		token := signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
		fast, ok := tk.verifyFast(token)
		slow, err := tk.verifySlow(token)
		if ok && err != nil {
			t.Fatalf("read by hand as %+v, refused by the library: %v\nclaims %s", fast, err, claimsJSON)
		}
		if ok && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("read by hand as %+v, by the library as %+v\nclaims %s", fast, slow, claimsJSON)
		}
		if !minted && ok {
			t.Fatalf("read by hand under a header Mint does not write")
		}
		// Any other signature is refused both ways.
		bad := token[:len(token)-2] + "AA"
		if bad == token {
			bad = token[:len(token)-2] + "BA"
		}
		if _, ok := tk.verifyFast(bad); ok {
			t.Fatalf("a wrong signature read by hand")
		}
		if _, err := tk.Verify(bad); err == nil {
			t.Fatalf("a wrong signature verified")
		}
	})
}

// FuzzMint: the hand-written mint gives the library's token byte for byte
// for any subject, partition and instant.
func FuzzMint(f *testing.F) {
	f.Add("g", "", int64(1800000000), int64(0), int64(3600))
	f.Add("s<&>\"\\", "c1", int64(1800000000), int64(999_999_999), int64(60))
	f.Add("Zoë\u2028\xff", "p\x00", int64(1), int64(5e8), int64(86400))
	tk, _ := New(secret)
	f.Fuzz(func(t *testing.T, sub, partition string, sec, nsec, ttlSec int64) {
		now := time.Unix(sec%4e9, nsec%1e9)
		ttl := time.Duration(1+ttlSec%86400) * time.Second
		p := berth.Principal{Subject: sub, Role: berth.RoleStaff}
		if partition != "" {
			p.Partitions = []string{partition, sub}
		}
		want, err := tk.mintLibrary(p, now, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.mintFast(p, now, ttl); got != want {
			t.Fatalf("hand    %s\nlibrary %s", got, want)
		}
	})
}
