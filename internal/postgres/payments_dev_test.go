package postgres_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

func devIntentRequest() payments.IntentRequest {
	id := uuid.NewString()
	return payments.IntentRequest{Kind: "hotel", PartitionID: uuid.NewString(), ReservationID: id, AmountCents: 12_000,
		Currency: "EUR", IdempotencyKey: "berth-hotel-" + id}
}

func storedIntents(t *testing.T, db *postgres.DB) int {
	t.Helper()
	var n int
	if err := dbtest.SQL(db).QueryRow(context.Background(), `SELECT count(*) FROM dev_payment_intents`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func isNotFound(err error) bool {
	var be *berth.Error
	return errors.As(err, &be) && be.Code == berth.CodeNotFound
}

// The development provider's intents are idempotent by key and cost no
// write: the first call and its replay return the same intent and secret
// and store nothing; the key reused for another payment gives another
// intent, and the key pays only one of the two (the other is not found).
func TestDevIntentIdempotentByKey(t *testing.T) {
	db, _ := dbtest.New(t, postgres.Options{})
	p := bookingtest.NewDevPayments(t, db)
	ctx := context.Background()
	req := devIntentRequest()
	first, err := p.CreateIntent(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ID, payments.DevIntentPrefix) || first.ClientSecret == "" || first.AmountCents != 12_000 ||
		first.Currency != "EUR" || first.ReservationID != req.ReservationID || first.Status != payments.IntentPending {
		t.Fatalf("first intent = %+v", first)
	}
	again, err := p.CreateIntent(ctx, req)
	if err != nil || again != first {
		t.Fatalf("replay = %+v, %v; want %+v", again, err, first)
	}
	if n := storedIntents(t, db); n != 0 {
		t.Fatalf("%d intents stored by creating them; want none", n)
	}
	other := req
	other.AmountCents = 1
	second, err := p.CreateIntent(ctx, other)
	if err != nil || second.ID == first.ID {
		t.Fatalf("the key reused for another amount: %+v, %v", second, err)
	}
	if _, settled, err := p.Pay(ctx, first.ID, first.ClientSecret, payments.IntentSucceeded); err != nil || !settled {
		t.Fatalf("pay the first: settled %v, %v", settled, err)
	}
	if _, _, err := p.Pay(ctx, second.ID, second.ClientSecret, payments.IntentSucceeded); !isNotFound(err) {
		t.Fatalf("paying a second intent of one key: %v; want not_found", err)
	}
	if _, err := p.GetIntent(ctx, second.ID); !errors.Is(err, payments.ErrIntentNotFound) {
		t.Fatalf("the second intent of a paid key: %v; want not found", err)
	}
	if again, err := p.CreateIntent(ctx, req); err != nil || again != first {
		t.Fatalf("replay after paying = %+v, %v; want %+v", again, err, first)
	}
}

// An intent waits for payment until it is paid with its own secret; the
// payment stores it, once; what the provider reports is what the intent
// was made for. A wrong secret is not found and stores nothing.
func TestDevIntentPayAndGet(t *testing.T) {
	db, _ := dbtest.New(t, postgres.Options{})
	p := bookingtest.NewDevPayments(t, db)
	ctx := context.Background()
	req := devIntentRequest()
	in, err := p.CreateIntent(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := payments.Intent{ID: in.ID, AmountCents: req.AmountCents, Currency: req.Currency, Status: payments.IntentPending,
		Kind: req.Kind, PartitionID: req.PartitionID, ReservationID: req.ReservationID}
	if got, err := p.GetIntent(ctx, in.ID); err != nil || got != want {
		t.Fatalf("unpaid intent = %+v, %v; want %+v", got, err, want)
	}
	// The secret of another id: the id's last character changed (to "A",
	// or "B" when it is "A" already — about one id in 64).
	last := "A"
	if strings.HasSuffix(in.ID, last) {
		last = "B"
	}
	for _, secret := range []string{"", in.ID, in.ClientSecret + "x", strings.Replace(in.ClientSecret, in.ID, in.ID[:len(in.ID)-1]+last, 1)} {
		if _, _, err := p.Pay(ctx, in.ID, secret, payments.IntentSucceeded); !isNotFound(err) {
			t.Fatalf("pay with secret %q: %v; want not_found", secret, err)
		}
	}
	if n := storedIntents(t, db); n != 0 {
		t.Fatalf("%d intents stored by wrong secrets", n)
	}
	paid, settled, err := p.Pay(ctx, in.ID, in.ClientSecret, payments.IntentSucceeded)
	want.Status = payments.IntentSucceeded
	if err != nil || !settled || paid != want {
		t.Fatalf("pay = %+v, %v, %v; want %+v settled", paid, settled, err, want)
	}
	if again, settled, err := p.Pay(ctx, in.ID, in.ClientSecret, payments.IntentFailed); err != nil || settled || again != want {
		t.Fatalf("pay again = %+v, %v, %v; want %+v unchanged", again, settled, err, want)
	}
	if got, err := p.GetIntent(ctx, in.ID); err != nil || got != want {
		t.Fatalf("paid intent = %+v, %v; want %+v", got, err, want)
	}
	if n := storedIntents(t, db); n != 1 {
		t.Fatalf("%d intents stored; want the paid one", n)
	}
	failing, _ := p.CreateIntent(ctx, devIntentRequest())
	if got, settled, err := p.Pay(ctx, failing.ID, failing.ClientSecret, payments.IntentFailed); err != nil || !settled || got.Status != payments.IntentFailed {
		t.Fatalf("a failed payment = %+v, %v, %v", got, settled, err)
	}
	if got, err := p.GetIntent(ctx, failing.ID); err != nil || got.Status != payments.IntentFailed {
		t.Fatalf("the failed intent reads %+v, %v", got, err)
	}
}

// An altered intent id — its amount, currency, reservation, partition or
// kind changed, any byte flipped, or minted under another deployment's key
// — is not found, to GetIntent and to Pay alike, and nothing is stored.
func TestDevIntentForgeriesNotFound(t *testing.T) {
	db, _ := dbtest.New(t, postgres.Options{})
	p := bookingtest.NewDevPayments(t, db)
	ctx := context.Background()
	req := devIntentRequest()
	in, err := p.CreateIntent(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := payments.NewDevIntents("a key guessed by someone else, 32+ bytes")
	if err != nil {
		t.Fatal(err)
	}
	var forged []string
	for _, change := range []func(*payments.IntentRequest){
		func(r *payments.IntentRequest) { r.AmountCents = 1 },
		func(r *payments.IntentRequest) { r.Currency = "JPY" },
		func(r *payments.IntentRequest) { r.ReservationID = uuid.NewString() },
		func(r *payments.IntentRequest) { r.PartitionID = uuid.NewString() },
		func(r *payments.IntentRequest) { r.Kind = "clinic" },
		func(*payments.IntentRequest) {},
	} {
		r := req
		change(&r)
		f, err := forger.Mint(r)
		if err != nil {
			t.Fatal(err)
		}
		forged = append(forged, f.ID)
		if _, _, err := p.Pay(ctx, f.ID, f.ClientSecret, payments.IntentSucceeded); !isNotFound(err) {
			t.Errorf("paying %+v minted under another key: %v; want not_found", r, err)
		}
	}
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(in.ID, payments.DevIntentPrefix))
	for i := range raw {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		forged = append(forged, payments.DevIntentPrefix+base64.RawURLEncoding.EncodeToString(b))
	}
	for _, id := range forged {
		if got, err := p.GetIntent(ctx, id); !errors.Is(err, payments.ErrIntentNotFound) {
			t.Fatalf("GetIntent(%s) = %+v, %v; want not found", id, got, err)
		}
	}
	if n := storedIntents(t, db); n != 0 {
		t.Fatalf("%d intents stored by forgeries", n)
	}
}

// Guests racing to pay one intent, and two intents of one key, settle one
// payment each time: the first to store it; every other payer reads it.
func TestDevIntentConcurrentPayments(t *testing.T) {
	db, _ := dbtest.New(t, postgres.Options{})
	p := bookingtest.NewDevPayments(t, db)
	ctx := context.Background()
	req := devIntentRequest()
	one, _ := p.CreateIntent(ctx, req)
	other := req
	other.AmountCents++
	two, _ := p.CreateIntent(ctx, other)
	const payers = 16
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		settled, found int
		start          = make(chan struct{})
	)
	for i := range payers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := []payments.Intent{one, two}[i%2]
			<-start
			_, s, err := p.Pay(ctx, in.ID, in.ClientSecret, payments.IntentSucceeded)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && s:
				settled++
			case err == nil:
				found++
			case !isNotFound(err):
				t.Errorf("pay: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if settled != 1 || found != payers/2-1 {
		t.Fatalf("%d payments settled, %d found settled; want 1 and %d", settled, found, payers/2-1)
	}
	if n := storedIntents(t, db); n != 1 {
		t.Fatalf("%d intents stored; want one", n)
	}
}

// Ids too long for a token (a payment_ref is at most payments.MaxRefLen)
// make an intent stored at once under a random id, which is paid, read and
// replayed from its row as before ADR 0027.
func TestDevIntentTooLongIsStored(t *testing.T) {
	db, _ := dbtest.New(t, postgres.Options{})
	p := bookingtest.NewDevPayments(t, db)
	ctx := context.Background()
	req := devIntentRequest()
	req.PartitionID = "a-partition-" + strings.Repeat("x", 80)
	in, err := p.CreateIntent(ctx, req)
	if err != nil || len(in.ID) > payments.MaxRefLen || storedIntents(t, db) != 1 {
		t.Fatalf("long ids: %+v, %v", in, err)
	}
	if again, err := p.CreateIntent(ctx, req); err != nil || again != in {
		t.Fatalf("replay = %+v, %v; want %+v", again, err, in)
	}
	other := req
	other.AmountCents = 1
	if _, err := p.CreateIntent(ctx, other); err == nil {
		t.Fatal("the key of a stored intent reused for another amount was accepted")
	}
	if _, _, err := p.Pay(ctx, in.ID, "wrong", payments.IntentSucceeded); !isNotFound(err) {
		t.Fatalf("a wrong secret: %v", err)
	}
	if got, settled, err := p.Pay(ctx, in.ID, in.ClientSecret, payments.IntentSucceeded); err != nil || !settled ||
		got.PartitionID != req.PartitionID || got.AmountCents != req.AmountCents {
		t.Fatalf("pay = %+v, %v, %v", got, settled, err)
	}
	if got, err := p.GetIntent(ctx, in.ID); err != nil || got.Status != payments.IntentSucceeded {
		t.Fatalf("get = %+v, %v", got, err)
	}
}

// The provider refuses to start without a key long enough to be secret.
func TestDevProviderNeedsAKey(t *testing.T) {
	db, _ := dbtest.New(t, postgres.Options{})
	for _, key := range []string{"", "dev", strings.Repeat("k", payments.MinDevIntentSecretLen-1)} {
		if _, err := postgres.NewDevPaymentProvider(db, key); err == nil {
			t.Errorf("a key of %d bytes was accepted", len(key))
		}
	}
}
