// Package stripepay is the Stripe payment provider: payment intents for
// prepaid holds, their status before a guest's confirmation, and refunds,
// through Stripe's official client (github.com/stripe/stripe-go). Each
// intent carries the reservation it pays for in its metadata, and that
// binding is what a confirmation checks (payments.Due.Check): a paid intent
// of one reservation never confirms another.
package stripepay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/payments"
	"github.com/stripe/stripe-go/v82"
)

// Metadata keys written on every intent and refund Berth creates.
const (
	metaKind        = "berth_kind"
	metaPartition   = "berth_partition_id"
	metaReservation = "berth_reservation_id"
)

// Config configures the client. URL is empty for Stripe itself; tests and
// local runs point it at stripe-mock.
type Config struct {
	APIKey string
	URL    string
	// HTTPClient defaults to one with a 10 s timeout.
	HTTPClient *http.Client
	// MaxNetworkRetries is stripe-go's own retry of transient failures
	// (idempotency keys make them safe); default 2.
	MaxNetworkRetries int64
}

// Provider talks to Stripe.
type Provider struct {
	sc *stripe.Client
}

var _ payments.Provider = (*Provider)(nil)

// New returns a provider. It does not call Stripe.
func New(cfg Config) (*Provider, error) {
	if !strings.HasPrefix(cfg.APIKey, "sk_") && !strings.HasPrefix(cfg.APIKey, "rk_") {
		return nil, errors.New("stripe: want a secret (sk_…) or restricted (rk_…) API key")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	retries := cfg.MaxNetworkRetries
	if retries == 0 {
		retries = 2
	}
	bc := &stripe.BackendConfig{
		HTTPClient:        cfg.HTTPClient,
		MaxNetworkRetries: stripe.Int64(retries),
		// stripe-go logs through its own logger; errors reach our logs
		// through the returned errors instead.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.URL != "" {
		bc.URL = stripe.String(strings.TrimRight(cfg.URL, "/"))
	}
	return &Provider{sc: stripe.NewClient(cfg.APIKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc)))}, nil
}

// CreateIntent creates a PaymentIntent for exactly the amount due, bound to
// the reservation by its metadata. The idempotency key makes a replayed
// hold get the same intent back (Stripe keeps keys for 24 h, longer than a
// hold lives).
func (p *Provider) CreateIntent(ctx context.Context, req payments.IntentRequest) (payments.Intent, error) {
	params := &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(req.AmountCents),
		AutomaticPaymentMethods: &stripe.PaymentIntentCreateAutomaticPaymentMethodsParams{
			Enabled: stripe.Bool(true),
		},
		Description: stripe.String(fmt.Sprintf("Berth %s %s", req.Kind, req.ReservationID)),
	}
	if req.Currency != "" { // a missing currency is Stripe's to refuse, not an empty one to guess at
		params.Currency = stripe.String(strings.ToLower(req.Currency))
	}
	params.AddMetadata(metaKind, req.Kind)
	params.AddMetadata(metaPartition, req.PartitionID)
	params.AddMetadata(metaReservation, req.ReservationID)
	params.SetIdempotencyKey(req.IdempotencyKey)
	params.Context = ctx
	pi, err := p.sc.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		return payments.Intent{}, fmt.Errorf("stripe: create payment intent: %w", mapError(err))
	}
	return intentOf(pi), nil
}

// GetIntent retrieves a PaymentIntent. A reference that is no PaymentIntent
// id is not looked up at all: a guest's free-text payment_ref never reaches
// Stripe unless it has the shape of an intent id.
func (p *Provider) GetIntent(ctx context.Context, id string) (payments.Intent, error) {
	if !validIntentID(id) {
		return payments.Intent{}, payments.ErrIntentNotFound
	}
	params := &stripe.PaymentIntentRetrieveParams{}
	params.Context = ctx
	pi, err := p.sc.V1PaymentIntents.Retrieve(ctx, id, params)
	if err != nil {
		return payments.Intent{}, fmt.Errorf("stripe: retrieve payment intent: %w", mapError(err))
	}
	in := intentOf(pi)
	in.ClientSecret = "" // only the hold's answer carries it
	return in, nil
}

// Refund refunds amount of the payment, once per idempotency key (the
// refund_requested event id).
func (p *Provider) Refund(ctx context.Context, req payments.RefundRequest) (payments.Refund, error) {
	if !validIntentID(req.PaymentRef) {
		return payments.Refund{}, fmt.Errorf("stripe: refund: %q is no payment intent id", req.PaymentRef)
	}
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(req.PaymentRef)}
	if req.AmountCents > 0 {
		params.Amount = stripe.Int64(req.AmountCents)
	}
	params.AddMetadata(metaKind, req.Kind)
	params.AddMetadata(metaPartition, req.PartitionID)
	params.AddMetadata(metaReservation, req.ReservationID)
	params.SetIdempotencyKey(req.IdempotencyKey)
	params.Context = ctx
	r, err := p.sc.V1Refunds.Create(ctx, params)
	if err != nil {
		return payments.Refund{}, fmt.Errorf("stripe: refund: %w", mapError(err))
	}
	dup := r.LastResponse != nil && r.LastResponse.Header.Get("Idempotent-Replayed") == "true"
	return payments.Refund{ID: r.ID, Duplicate: dup}, nil
}

// intentOf maps Stripe's PaymentIntent to Berth's view: succeeded, failed
// (cancelled), or pending (every other status: no money has arrived).
func intentOf(pi *stripe.PaymentIntent) payments.Intent {
	in := payments.Intent{
		ID: pi.ID, ClientSecret: pi.ClientSecret, AmountCents: pi.Amount, Currency: strings.ToUpper(string(pi.Currency)),
		Status:        payments.IntentPending,
		Kind:          pi.Metadata[metaKind],
		PartitionID:   pi.Metadata[metaPartition],
		ReservationID: pi.Metadata[metaReservation],
	}
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		in.Status = payments.IntentSucceeded
	case stripe.PaymentIntentStatusCanceled:
		in.Status = payments.IntentFailed
	}
	return in
}

// validIntentID reports whether id has the shape of a PaymentIntent id.
func validIntentID(id string) bool {
	if !strings.HasPrefix(id, "pi_") || len(id) > 255 || len(id) < 4 {
		return false
	}
	for _, c := range id {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// ErrRejected is a request Stripe refused (4xx other than a missing
// object): retrying it unchanged will not help.
var ErrRejected = errors.New("rejected by stripe")

// mapError sorts Stripe's errors: a missing intent is
// payments.ErrIntentNotFound, other refusals are ErrRejected (with Stripe's
// code and message), and everything else (5xx, network) stays transient.
func mapError(err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code == stripe.ErrorCodeResourceMissing || se.HTTPStatusCode == http.StatusNotFound:
		return fmt.Errorf("%w (%s)", payments.ErrIntentNotFound, se.Msg)
	case se.HTTPStatusCode >= 400 && se.HTTPStatusCode < 500 && se.HTTPStatusCode != http.StatusTooManyRequests:
		return fmt.Errorf("%w: %s %s: %s", ErrRejected, se.Type, se.Code, se.Msg)
	}
	return err
}
