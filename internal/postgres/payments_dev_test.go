package postgres_test

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
)

// The development provider's intents are idempotent by key: the first call
// creates one (returned by its INSERT), a replay returns the same intent and
// secret, and the key reused for another payment is refused.
func TestDevIntentIdempotentByKey(t *testing.T) {
	db, _ := dbtest.New(t, postgres.Options{})
	p := postgres.NewDevPaymentProvider(db)
	ctx := context.Background()
	req := payments.IntentRequest{Kind: "hotel", PartitionID: "h1", ReservationID: "r1", AmountCents: 12_000,
		Currency: "EUR", IdempotencyKey: "berth-hotel-r1"}
	first, err := p.CreateIntent(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.ID == "" || first.ClientSecret == "" || first.AmountCents != 12_000 || first.Currency != "EUR" ||
		first.ReservationID != "r1" || first.Status != payments.IntentStatus("requires_payment") {
		t.Fatalf("first intent = %+v", first)
	}
	again, err := p.CreateIntent(ctx, req)
	if err != nil || again != first {
		t.Fatalf("replay = %+v, %v; want %+v", again, err, first)
	}
	other := req
	other.AmountCents = 1
	if _, err := p.CreateIntent(ctx, other); err == nil {
		t.Fatal("the key reused for another amount was accepted")
	}
}
