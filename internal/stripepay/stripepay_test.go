package stripepay_test

// These tests run the adapter against stripe-mock, Stripe's own test server
// (`make deps` builds and starts it and writes BERTH_STRIPE_MOCK_URL into
// .local/env). stripe-mock is stateless: it validates every request against
// Stripe's OpenAPI specification and answers fixtures, reflecting some of
// the request's parameters. So these tests show what it can:
//   - the request shapes Berth sends (amount, lower-case currency, the
//     metadata binding the intent to its reservation, the Idempotency-Key
//     header), recorded on the way out and accepted by stripe-mock's
//     validator;
//   - the parsing of Stripe's answers into payments.Intent;
//   - the mapping of Stripe's errors (a request Stripe's schema refuses is
//     ErrRejected; a network failure stays transient);
//   - refunds.
// It cannot show state: an intent stripe-mock "creates" is not the one a
// later retrieve returns (that is a fixture, never succeeded, without our
// metadata), it never succeeds because nobody can pay it, and an
// idempotency key is not honoured. A real succeeded payment, the binding
// check on it and the refund of a mismatch are proven end to end with the
// development provider (internal/httpapi TestPaidConfirmations and the
// finding tests), which behaves as Stripe does for those.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/stripepay"
)

func mockURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("BERTH_STRIPE_MOCK_URL")
	if u == "" {
		if os.Getenv("BERTH_REQUIRE_DB") != "" {
			t.Fatal("BERTH_STRIPE_MOCK_URL is not set: run `make deps` (it starts stripe-mock)")
		}
		t.Skip("BERTH_STRIPE_MOCK_URL is not set; `make deps` starts stripe-mock")
	}
	return u
}

// recorder keeps every request the adapter sends, then forwards it.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path string
	header       http.Header
	form         url.Values
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	form, _ := url.ParseQuery(string(body))
	r.mu.Lock()
	r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.Header.Clone(), form})
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recorder) last(t *testing.T) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("no request was sent")
	}
	return r.reqs[len(r.reqs)-1]
}

func newProvider(t *testing.T) (*stripepay.Provider, *recorder) {
	t.Helper()
	rec := &recorder{}
	p, err := stripepay.New(stripepay.Config{APIKey: "sk_test_berth", URL: mockURL(t), HTTPClient: &http.Client{Transport: rec},
		MaxNetworkRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

func TestCreateIntentAgainstStripeMock(t *testing.T) {
	t.Parallel()
	p, rec := newProvider(t)
	in, err := p.CreateIntent(context.Background(), payments.IntentRequest{Kind: "hotel", PartitionID: "h-1",
		ReservationID: "r-1", AmountCents: 40000, Currency: "EUR", IdempotencyKey: "berth-hotel-r-1"})
	if err != nil {
		t.Fatalf("create intent: %v", err)
	}
	req := rec.last(t)
	if req.method != http.MethodPost || req.path != "/v1/payment_intents" {
		t.Fatalf("sent %s %s", req.method, req.path)
	}
	for k, want := range map[string]string{"amount": "40000", "currency": "eur", "metadata[berth_kind]": "hotel",
		"metadata[berth_partition_id]": "h-1", "metadata[berth_reservation_id]": "r-1", "automatic_payment_methods[enabled]": "true"} {
		if got := req.form.Get(k); got != want {
			t.Errorf("form %s = %q, want %q", k, got, want)
		}
	}
	if got := req.header.Get("Idempotency-Key"); got != "berth-hotel-r-1" {
		t.Errorf("Idempotency-Key %q", got)
	}
	if !strings.HasPrefix(req.header.Get("Authorization"), "Bearer sk_test_berth") {
		t.Errorf("Authorization %q", req.header.Get("Authorization"))
	}
	// stripe-mock reflects amount and currency; the rest is a fixture.
	if !strings.HasPrefix(in.ID, "pi_") || in.ClientSecret == "" || in.AmountCents != 40000 || in.Currency != "EUR" {
		t.Fatalf("parsed intent %+v", in)
	}
	if in.Status != payments.IntentPending {
		t.Fatalf("a new intent is %s, want pending", in.Status)
	}
}

// A retrieved intent is parsed, and a fixture that never succeeded (and is
// bound to no reservation) does not settle anything: the confirmation
// check refuses it.
func TestRetrievedIntentIsCheckedAgainstStripeMock(t *testing.T) {
	t.Parallel()
	p, rec := newProvider(t)
	in, err := p.GetIntent(context.Background(), "pi_berth_123")
	if err != nil {
		t.Fatalf("retrieve: %v", err)
	}
	if req := rec.last(t); req.method != http.MethodGet || req.path != "/v1/payment_intents/pi_berth_123" {
		t.Fatalf("sent %s %s", req.method, req.path)
	}
	if in.ID != "pi_berth_123" || in.AmountCents <= 0 || len(in.Currency) != 3 || in.Currency != strings.ToUpper(in.Currency) || in.ClientSecret != "" {
		t.Fatalf("parsed intent %+v", in)
	}
	due := payments.Due{Kind: "hotel", PartitionID: "h-1", ReservationID: "r-1", AmountCents: in.AmountCents, Currency: in.Currency}
	var m *payments.Mismatch
	if err := due.Check(in); !errors.As(err, &m) || m.Reason != "not_succeeded" {
		t.Fatalf("an unpaid intent checked as %v", err)
	}
}

// A payment_ref that is no intent id never reaches Stripe.
func TestFreeTextRefIsNotLookedUp(t *testing.T) {
	t.Parallel()
	p, rec := newProvider(t)
	for _, ref := range []string{"free", "pay-1234", "pi_../../v1/charges", "pi_", "pi_a b", ""} {
		if _, err := p.GetIntent(context.Background(), ref); !errors.Is(err, payments.ErrIntentNotFound) {
			t.Errorf("%q: %v, want ErrIntentNotFound", ref, err)
		}
	}
	if len(rec.reqs) != 0 {
		t.Fatalf("%d request(s) sent for refs that are no intent ids", len(rec.reqs))
	}
}

func TestRefundAgainstStripeMock(t *testing.T) {
	t.Parallel()
	p, rec := newProvider(t)
	r, err := p.Refund(context.Background(), payments.RefundRequest{IdempotencyKey: "evt-refund-1", Kind: "clinic",
		PartitionID: "c-1", ReservationID: "a-1", PaymentRef: "pi_berth_9", AmountCents: 4500, Currency: "EUR"})
	if err != nil {
		t.Fatalf("refund: %v", err)
	}
	req := rec.last(t)
	if req.method != http.MethodPost || req.path != "/v1/refunds" || req.form.Get("payment_intent") != "pi_berth_9" ||
		req.form.Get("amount") != "4500" || req.form.Get("metadata[berth_reservation_id]") != "a-1" ||
		req.header.Get("Idempotency-Key") != "evt-refund-1" {
		t.Fatalf("sent %s %s %v %v", req.method, req.path, req.form, req.header)
	}
	if !strings.HasPrefix(r.ID, "re_") {
		t.Fatalf("refund id %q", r.ID)
	}
	if _, err := p.Refund(context.Background(), payments.RefundRequest{IdempotencyKey: "k", PaymentRef: "cash-1", AmountCents: 1}); err == nil {
		t.Fatal("a refund of a desk reference was sent to Stripe")
	}
}

// stripe-mock validates requests against Stripe's schema: a request it
// refuses is ErrRejected (permanent), and an unreachable Stripe is neither
// that nor not-found (transient: the caller answers 503 and retries).
func TestErrorMappingAgainstStripeMock(t *testing.T) {
	t.Parallel()
	p, _ := newProvider(t)
	_, err := p.CreateIntent(context.Background(), payments.IntentRequest{Kind: "hotel", ReservationID: "r", AmountCents: 100,
		Currency: "", IdempotencyKey: "k-bad"}) // currency is required by Stripe's schema
	if !errors.Is(err, stripepay.ErrRejected) {
		t.Fatalf("a request Stripe's schema refuses: %v, want ErrRejected", err)
	}
	down, err := stripepay.New(stripepay.Config{APIKey: "sk_test_x", URL: "http://127.0.0.1:1", MaxNetworkRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = down.GetIntent(context.Background(), "pi_123")
	if err == nil || errors.Is(err, stripepay.ErrRejected) || errors.Is(err, payments.ErrIntentNotFound) {
		t.Fatalf("unreachable Stripe: %v, want a transient error", err)
	}
	if _, err := stripepay.New(stripepay.Config{APIKey: "pk_live_publishable"}); err == nil {
		t.Fatal("a publishable key was accepted as a secret key")
	}
}
