package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/stripepay"
	"github.com/stripe/stripe-go/v82/webhook"
)

const stripeWebhookSecret = "whsec_berth_test_0123456789abcdef"

// stripeState plays the part of Stripe's memory in front of stripe-mock,
// which is stateless (internal/stripepay's tests say what it can show):
// every request still goes to stripe-mock and is validated there, but the
// answer to retrieving a PaymentIntent is patched with what the test says
// Stripe knows of that intent — paid or not, how much, for which
// reservation. An intent the test says nothing of keeps stripe-mock's
// fixture (never paid, bound to nothing).
type stripeState struct {
	mu      sync.Mutex
	intents map[string]map[string]any // intent id → fields to patch
}

func (s *stripeState) set(id string, fields map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.intents[id] = fields
}

func (s *stripeState) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !strings.HasPrefix(req.URL.Path, "/v1/payment_intents/") {
		return resp, err
	}
	id := strings.TrimPrefix(req.URL.Path, "/v1/payment_intents/")
	s.mu.Lock()
	patch, ok := s.intents[id]
	s.mu.Unlock()
	if !ok || resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	var body map[string]any
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	for k, v := range patch {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return resp, nil
}

// TestStripeWebhook: Stripe's own signed events, against stripe-mock. A
// body signed with another secret, unsigned or signed too long ago is 401
// and changes nothing; an event whose intent Stripe does not report paid
// confirms nothing, whatever the event's snapshot says; a correctly signed
// payment_intent.succeeded for exactly what is due confirms (audited as a
// webhook payment of that amount); its redelivery is a replay that changes
// nothing more; an intent paid with another amount confirms nothing and
// requests a refund — the same checks and the same key space as
// POST /v1/payments/webhook.
func TestStripeWebhook(t *testing.T) {
	t.Parallel()
	mock := os.Getenv("BERTH_STRIPE_MOCK_URL")
	if mock == "" {
		if os.Getenv("BERTH_REQUIRE_DB") != "" {
			t.Fatal("BERTH_STRIPE_MOCK_URL is not set: run `make deps` (it starts stripe-mock)")
		}
		t.Skip("BERTH_STRIPE_MOCK_URL is not set; `make deps` starts stripe-mock")
	}
	state := &stripeState{intents: map[string]map[string]any{}}
	provider, err := stripepay.New(stripepay.Config{APIKey: "sk_test_berth", URL: mock, HTTPClient: &http.Client{Transport: state, Timeout: 10 * time.Second},
		MaxNetworkRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	events, err := stripepay.NewEvents(stripeWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	e := bookingtest.Start(t, bookingtest.Options{Configure: func(c *httpapi.Config, s *postgres.Store) {
		c.PaymentProvider = provider
		c.StripeWebhook = &httpapi.StripeWebhook{Events: events, Effects: postgres.PaymentEffects{Hotels: s}}
	}})
	h := e.SeedHotel("", 5, 0, bookingtest.Date(0), bookingtest.Date(30))
	guest := e.Token("g-stripe", berth.RoleGuest)
	hold := func() (resID, intentID string) {
		r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: guest,
			IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g-stripe", "room_type_id": h.RoomTypeID,
				"check_in": bookingtest.Date(5), "check_out": bookingtest.Date(7), "quantity": 1}})
		pay, _ := r.JSON()["payment"].(map[string]any)
		if r.Status != http.StatusCreated || pay == nil || !strings.HasPrefix(pay["intent_id"].(string), "pi_") || pay["amount_cents"] != float64(20000) {
			t.Fatalf("hold with stripe-mock as the provider: %d %s", r.Status, r.Body)
		}
		return r.JSON()["reservation_id"].(string), pay["intent_id"].(string)
	}
	paid := func(resID string, amount int64) map[string]any {
		return map[string]any{"status": "succeeded", "amount": amount, "amount_received": amount, "currency": "eur",
			"metadata": map[string]any{"berth_kind": "hotel", "berth_partition_id": h.ID, "berth_reservation_id": resID}}
	}
	// event is a Stripe event about the intent; its snapshot claims
	// whatever snapshot says — only the signature and the ids are believed.
	event := func(id, typ, intentID string, snapshot map[string]any) []byte {
		obj := map[string]any{"id": intentID, "object": "payment_intent"}
		for k, v := range snapshot {
			obj[k] = v
		}
		b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": "2024-06-20",
			"created": time.Now().Unix(), "livemode": false, "pending_webhooks": 1, "data": map[string]any{"object": obj}})
		return b
	}
	sign := func(body []byte, secret string, at time.Time) string {
		return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
	}
	deliver := func(body []byte, signature string) bookingtest.Response {
		h := map[string]string{}
		if signature != "" {
			h["Stripe-Signature"] = signature
		}
		return e.Do(bookingtest.Request{Method: "POST", Path: "/v1/payments/stripe/webhook", Header: h, Body: body})
	}
	confirmations := func(resID string) int {
		var n int
		if err := dbtest.SQL(e.DB).QueryRow(context.Background(), `SELECT count(*) FROM payment_confirmations WHERE reservation_id = $1`, resID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	resA, intentA := hold()
	body := event("evt_berth_a", "payment_intent.succeeded", intentA, paid(resA, 20000))
	for name, sig := range map[string]string{
		"signed with another secret": sign(body, "whsec_someone_else_0123456789", time.Now()),
		"unsigned":                   "",
		"signed ten minutes ago":     sign(body, stripeWebhookSecret, time.Now().Add(-10*time.Minute)),
		"not a signature":            "t=1,v1=00",
	} {
		if r := deliver(body, sig); r.Status != http.StatusUnauthorized || r.Code() != string(berth.CodeUnauthorized) {
			t.Fatalf("%s: %d %s, want 401 unauthorized", name, r.Status, r.Body)
		}
	}
	// The event's own snapshot claims success; Stripe says otherwise. An
	// intent bound to nothing (stripe-mock's fixture) pays for nothing of
	// ours; one bound to the reservation but unpaid is still pending.
	if r := deliver(body, sign(body, stripeWebhookSecret, time.Now())); r.Status != http.StatusOK || r.JSON()["outcome"] != "not_found" {
		t.Fatalf("an event about an intent Stripe binds to nothing: %d %s, want 200 outcome not_found", r.Status, r.Body)
	}
	unpaid := paid(resA, 20000)
	unpaid["status"], unpaid["amount_received"] = "requires_payment_method", 0
	state.set(intentA, unpaid)
	if r := deliver(body, sign(body, stripeWebhookSecret, time.Now())); r.Status != http.StatusOK || r.JSON()["outcome"] != "pending" {
		t.Fatalf("an event about an intent Stripe reports unpaid: %d %s, want 200 outcome pending", r.Status, r.Body)
	}
	if status, version := reservationState(t, e, h, resA); status != "held" || version != 1 || confirmations(resA) != 0 {
		t.Fatalf("refused and pending events left %s v%d with %d confirmations", status, version, confirmations(resA))
	}

	// Paid at Stripe for exactly what is due: the event confirms, once.
	state.set(intentA, paid(resA, 20000))
	sig := sign(body, stripeWebhookSecret, time.Now())
	first := deliver(body, sig)
	if first.Status != http.StatusOK || first.JSON()["outcome"] != "applied" || first.JSON()["status"] != "confirmed" {
		t.Fatalf("a paid intent: %d %s, want 200 applied confirmed", first.Status, first.Body)
	}
	if c, ok := confirmationOf(t, e, resA); !ok || c != (confirmation{"webhook", intentA, "EUR", "stripe", "system", 20000}) {
		t.Fatalf("audit row %+v (%v)", c, ok)
	}
	again := deliver(body, sig)
	if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
		t.Fatalf("a redelivered event: %d %s (replayed %q), want the first answer replayed", again.Status, again.Body, again.Header.Get("Idempotent-Replayed"))
	}
	if status, version := reservationState(t, e, h, resA); status != "confirmed" || version != 2 || confirmations(resA) != 1 {
		t.Fatalf("after a redelivery: %s v%d with %d confirmations", status, version, confirmations(resA))
	}

	// Paid at Stripe, but one cent short: nothing confirmed, money back.
	resB, intentB := hold()
	state.set(intentB, paid(resB, 19999))
	bodyB := event("evt_berth_b", "payment_intent.succeeded", intentB, paid(resB, 20000))
	r := deliver(bodyB, sign(bodyB, stripeWebhookSecret, time.Now()))
	if r.Status != http.StatusOK || r.JSON()["outcome"] != "payment_mismatch" || r.JSON()["refund_requested"] != true {
		t.Fatalf("an intent paid with another amount: %d %s, want 200 payment_mismatch with refund_requested", r.Status, r.Body)
	}
	if status, version := reservationState(t, e, h, resB); status != "held" || version != 1 || confirmations(resB) != 0 {
		t.Fatalf("a mismatched payment left %s v%d with %d confirmations", status, version, confirmations(resB))
	}
	var refunds int
	if err := dbtest.SQL(e.DB).QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND event_type = 'refund_requested'`, resB).Scan(&refunds); err != nil || refunds != 1 {
		t.Fatalf("refund_requested events for the mismatch: %d (%v), want 1", refunds, err)
	}

	// Events that settle nothing are acknowledged, so Stripe stops sending them.
	other := event("evt_berth_c", "customer.created", "cus_123", nil)
	if r := deliver(other, sign(other, stripeWebhookSecret, time.Now())); r.Status != http.StatusOK || r.JSON()["outcome"] != "ignored" {
		t.Fatalf("another event type: %d %s, want 200 ignored", r.Status, r.Body)
	}
}
