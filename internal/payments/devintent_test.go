package payments

import (
	"encoding/base64"
	"errors"
	"math"
	"strings"
	"testing"
)

const testDevSecret = "0123456789abcdef0123456789abcdef-test-only"

func testDevIntents(t testing.TB, secret string) *DevIntents {
	t.Helper()
	d, err := NewDevIntents(secret)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func berthRequest() IntentRequest {
	return IntentRequest{Kind: "hotel", PartitionID: "0b4f3c2e-8d1a-4e5f-9a6b-7c8d9e0f1a2b",
		ReservationID: "5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f", AmountCents: 48_000, Currency: "EUR",
		IdempotencyKey: "berth-hotel-5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f"}
}

// An intent opens to exactly what it was made for, the same request gives
// the same id and secret, and every id Berth makes fits in a payment_ref.
func TestDevIntentRoundTrip(t *testing.T) {
	t.Parallel()
	d := testDevIntents(t, testDevSecret)
	longest := berthRequest()
	longest.Kind, longest.AmountCents = "clinic", math.MaxInt64
	odd := IntentRequest{Kind: "spa", PartitionID: "h1", ReservationID: "0B4F3C2E-8D1A-4E5F-9A6B-7C8D9E0F1A2B",
		AmountCents: 1, Currency: "", IdempotencyKey: "k"}
	for name, req := range map[string]IntentRequest{"hotel": berthRequest(), "longest Berth makes": longest, "not Berth's ids": odd} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in, err := d.Mint(req)
			if err != nil {
				t.Fatal(err)
			}
			if len(in.ID) > MaxRefLen || len(in.ClientSecret) > 200 {
				t.Fatalf("id of %d and secret of %d characters", len(in.ID), len(in.ClientSecret))
			}
			again, err := d.Mint(req)
			if err != nil || again != in {
				t.Fatalf("the same request gave %+v, %v; want %+v", again, err, in)
			}
			got, ok := d.Open(in.ID)
			if !ok {
				t.Fatalf("%s does not open", in.ID)
			}
			want := Intent{ID: in.ID, Kind: req.Kind, PartitionID: req.PartitionID, ReservationID: req.ReservationID,
				AmountCents: req.AmountCents, Currency: req.Currency, Status: IntentPending}
			if got.Intent(in.ID) != want || !strings.HasPrefix(got.KeyDigest, "sha256:") {
				t.Fatalf("opened %+v; want %+v", got, want)
			}
			if !d.SecretMatches(in.ID, in.ClientSecret) {
				t.Fatal("its own secret does not match")
			}
		})
	}
}

// A key names its intent: another key, or the same key for another
// payment, gives another id (the provider lets a key pay one of them).
func TestDevIntentKeyDigest(t *testing.T) {
	t.Parallel()
	d := testDevIntents(t, testDevSecret)
	req := berthRequest()
	first, _ := d.Mint(req)
	other := req
	other.IdempotencyKey = "another"
	second, _ := d.Mint(other)
	a, _ := d.Open(first.ID)
	b, _ := d.Open(second.ID)
	if first.ID == second.ID || a.KeyDigest == b.KeyDigest {
		t.Fatal("two keys gave one intent")
	}
	more := req
	more.AmountCents++
	third, _ := d.Mint(more)
	c, _ := d.Open(third.ID)
	if third.ID == first.ID || c.KeyDigest != a.KeyDigest {
		t.Fatalf("the key reused for another amount: id %s, digest %s; want another id under digest %s", third.ID, c.KeyDigest, a.KeyDigest)
	}
}

// An altered id never opens: any byte of it changed (amount, currency,
// reservation, partition, kind, key digest or the MAC itself), an id made
// under another key, an id re-encoded with other fields but the old MAC,
// and things that are not ids at all. A wrong client secret never matches.
func TestDevIntentRefusesForgeries(t *testing.T) {
	t.Parallel()
	d := testDevIntents(t, testDevSecret)
	in, err := d.Mint(berthRequest())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(in.ID, DevIntentPrefix))
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			b := append([]byte(nil), raw...)
			b[i] ^= flip
			if _, ok := d.Open(DevIntentPrefix + base64.RawURLEncoding.EncodeToString(b)); ok {
				t.Fatalf("byte %d xor %#x opens", i, flip)
			}
		}
	}
	// The same MAC on a body saying something else: each field altered.
	mac := raw[len(raw)-macLen:]
	for name, change := range map[string]func(*IntentRequest){
		"amount":      func(r *IntentRequest) { r.AmountCents = 1 },
		"currency":    func(r *IntentRequest) { r.Currency = "USD" },
		"reservation": func(r *IntentRequest) { r.ReservationID = "5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e80" },
		"partition":   func(r *IntentRequest) { r.PartitionID = "h2" },
		"kind":        func(r *IntentRequest) { r.Kind = "clinic" },
	} {
		req := berthRequest()
		change(&req)
		forged := testDevIntents(t, "another deployment's key, 32 bytes or more")
		other, _ := forged.Mint(req)
		b, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(other.ID, DevIntentPrefix))
		copy(b[len(b)-macLen:], mac)
		if _, ok := d.Open(DevIntentPrefix + base64.RawURLEncoding.EncodeToString(b)); ok {
			t.Errorf("%s altered under the original MAC opens", name)
		}
		if _, ok := d.Open(other.ID); ok {
			t.Errorf("%s: an id minted under another key opens", name)
		}
	}
	for _, id := range []string{"", DevIntentPrefix, "pi_dev_" + strings.Repeat("A", 200), "pi_3MtwBwLkdIwHu7ix28a3tqPa",
		in.ID + "A", in.ID[:len(in.ID)-1], strings.ToUpper(in.ID), in.ID + "=", "pi_dev_0b4f3c2e-8d1a-4e5f-9a6b-7c8d9e0f1a2b"} {
		if _, ok := d.Open(id); ok {
			t.Errorf("%q opens", id)
		}
	}
	for _, secret := range []string{"", in.ID, in.ClientSecret + "x", in.ClientSecret[:len(in.ClientSecret)-1],
		testDevIntents(t, "another deployment's key, 32 bytes or more").Secret(in.ID)} {
		if d.SecretMatches(in.ID, secret) {
			t.Errorf("secret %q matches", secret)
		}
	}
}

func TestDevIntentsRefuseWeakKeysAndBadRequests(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{"", "short", strings.Repeat("x", MinDevIntentSecretLen-1)} {
		if _, err := NewDevIntents(secret); err == nil {
			t.Errorf("a key of %d bytes was accepted", len(secret))
		}
	}
	d := testDevIntents(t, testDevSecret)
	for name, change := range map[string]func(*IntentRequest){
		"no amount":       func(r *IntentRequest) { r.AmountCents = 0 },
		"negative amount": func(r *IntentRequest) { r.AmountCents = -1 },
		"no key":          func(r *IntentRequest) { r.IdempotencyKey = "" },
		"too long":        func(r *IntentRequest) { r.PartitionID = strings.Repeat("p", 100) },
	} {
		req := berthRequest()
		change(&req)
		if _, err := d.Mint(req); err == nil {
			t.Errorf("%s: minted", name)
		} else if name == "too long" && !errors.Is(err, ErrDevIntentTooLong) {
			t.Errorf("too long: %v", err)
		}
	}
}

// BenchmarkDevIntentMint is what a prepaid hold's intent costs the booking
// service with the development provider (ADR 0027): no I/O, two HMACs.
func BenchmarkDevIntentMint(b *testing.B) {
	d := testDevIntents(b, testDevSecret)
	req := berthRequest()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Mint(req); err != nil {
			b.Fatal(err)
		}
	}
}
