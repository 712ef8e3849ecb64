package payments

import (
	"testing"
)

// FuzzDevIntent mints intents of arbitrary requests and opens arbitrary ids
// (an intent id is outside input: a payment_ref and a path segment). It
// never panics; whatever is minted opens to exactly its request; and no id
// opens but one the provider minted (the seed's, or this input's own).
func FuzzDevIntent(f *testing.F) {
	d, err := NewDevIntents(testDevSecret)
	if err != nil {
		f.Fatal(err)
	}
	seed, _ := d.Mint(berthRequest())
	f.Add("hotel", "0b4f3c2e-8d1a-4e5f-9a6b-7c8d9e0f1a2b", "5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f", int64(48_000), "EUR", "k", seed.ID)
	f.Add("clinic", "h1", "r1", int64(1), "", "", "pi_dev_")
	f.Add("", "", "", int64(-1), "USD", "key", "pi_dev_AQIBCw")
	f.Fuzz(func(t *testing.T, kind, partition, reservation string, amount int64, currency, key, id string) {
		req := IntentRequest{Kind: kind, PartitionID: partition, ReservationID: reservation, AmountCents: amount,
			Currency: currency, IdempotencyKey: key}
		minted, err := d.Mint(req)
		if err == nil {
			got, ok := d.Open(minted.ID)
			if !ok || got.Intent(minted.ID) != (Intent{ID: minted.ID, Kind: kind, PartitionID: partition, ReservationID: reservation,
				AmountCents: amount, Currency: currency, Status: IntentPending}) {
				t.Fatalf("minted %+v opens to %+v, %v", minted, got, ok)
			}
		}
		if got, ok := d.Open(id); ok && id != seed.ID && id != minted.ID {
			t.Fatalf("a fuzzed id opens: %q = %+v", id, got)
		}
	})
}
