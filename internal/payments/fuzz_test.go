package payments

import (
	"testing"
	"time"
)

// FuzzVerify feeds arbitrary signature headers and bodies to the webhook
// verifier: it never panics, and whatever it accepts stops verifying once a
// single byte of the body changes.
func FuzzVerify(f *testing.F) {
	secret := []byte("whsec_fuzz_fuzz_fuzz_fuzz_fuzz_fuzz")
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1","type":"payment.succeeded"}`)
	f.Add(Sign(secret, now, body), body)
	f.Add(Sign(secret, now.Add(-10*time.Minute), body), body)
	f.Add("t=1800000000,v1=00", body)
	f.Add("t=,v1=", []byte{})
	f.Add("v1="+Sign(secret, now, body)[14:], body)
	f.Add("t=1800000000,t=1800000000,v1=ab", body)
	f.Add("t=99999999999999999999,v1=ab", body)
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		if Verify(secret, header, body, now) != nil {
			return
		}
		tampered := append(append([]byte{}, body...), 'x')
		if Verify(secret, header, tampered, now) == nil {
			t.Fatalf("header %q verifies a tampered body", header)
		}
		if Verify([]byte("another-secret-another-secret-xx"), header, body, now) == nil {
			t.Fatalf("header %q verifies under another secret", header)
		}
	})
}
