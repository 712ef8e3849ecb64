package payments

import (
	"errors"
	"testing"
)

func TestDueCheck(t *testing.T) {
	t.Parallel()
	due := Due{Kind: "hotel", PartitionID: "h1", ReservationID: "r1", AmountCents: 40000, Currency: "EUR"}
	paid := Intent{ID: "pi_1", Status: IntentSucceeded, AmountCents: 40000, Currency: "EUR", Kind: "hotel", PartitionID: "h1", ReservationID: "r1"}
	for _, tc := range []struct {
		name   string
		change func(*Intent)
		reason string // "" = settles
	}{
		{"exact", func(*Intent) {}, ""},
		{"pending", func(i *Intent) { i.Status = IntentPending }, "not_succeeded"},
		{"failed", func(i *Intent) { i.Status = IntentFailed }, "not_succeeded"},
		{"another reservation of the same price", func(i *Intent) { i.ReservationID = "r2" }, "other_reservation"},
		{"another hotel", func(i *Intent) { i.PartitionID = "h2" }, "other_reservation"},
		{"a clinic", func(i *Intent) { i.Kind = "clinic" }, "other_reservation"},
		{"no binding", func(i *Intent) { i.Kind, i.PartitionID, i.ReservationID = "", "", "" }, "other_reservation"},
		{"one cent", func(i *Intent) { i.AmountCents = 1 }, "amount"},
		{"one cent over", func(i *Intent) { i.AmountCents = 40001 }, "amount"},
		{"negative", func(i *Intent) { i.AmountCents = -40000 }, "amount"},
		{"another currency", func(i *Intent) { i.Currency = "USD" }, "currency"},
		{"lower-case currency", func(i *Intent) { i.Currency = "eur" }, "currency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := paid
			tc.change(&in)
			err := due.Check(in)
			var m *Mismatch
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.reason != "" && (!errors.As(err, &m) || m.Reason != tc.reason):
				t.Fatalf("got %v, want reason %s", err, tc.reason)
			}
		})
	}
}

func TestPaymentSettles(t *testing.T) {
	t.Parallel()
	due := Due{AmountCents: 5000, Currency: "EUR"}
	free := Due{AmountCents: 0, Currency: "EUR"}
	unpriced := Due{AmountCents: -1} // a prepaid appointment without a price
	for _, tc := range []struct {
		name string
		pay  Payment
		due  Due
		ok   bool
	}{
		{"online exact", Payment{Method: MethodOnline, AmountCents: 5000, Currency: "EUR"}, due, true},
		{"webhook short", Payment{Method: MethodWebhook, AmountCents: 4999, Currency: "EUR"}, due, false},
		{"webhook zero", Payment{Method: MethodWebhook, AmountCents: 0, Currency: "EUR"}, due, false},
		{"desk", Payment{Method: MethodDesk}, due, true},
		{"desk without a price", Payment{Method: MethodDesk}, unpriced, true},
		{"online without a price", Payment{Method: MethodOnline, AmountCents: 0, Currency: ""}, unpriced, false},
		{"nothing for something", Payment{Method: MethodNone}, due, false},
		{"nothing for nothing", Payment{Method: MethodNone}, free, true},
		{"nothing without a price", Payment{Method: MethodNone}, unpriced, false},
		{"no method at all", Payment{AmountCents: 5000, Currency: "EUR"}, due, false},
	} {
		if err := tc.pay.Settles(tc.due); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if (Payment{Method: MethodDesk}).RefundsOnMismatch() || (Payment{Method: MethodOnline}).RefundsOnMismatch() ||
		!(Payment{Method: MethodWebhook}).RefundsOnMismatch() {
		t.Error("only the provider's webhook reports money taken that a mismatch must give back")
	}
}
