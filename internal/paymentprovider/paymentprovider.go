// Package paymentprovider chooses the payment provider from the environment
// and builds it: Stripe (internal/stripepay) in production, or the
// development provider (postgres.DevPaymentProvider) for `make run` and the
// tests. Both binaries that talk to the provider (booking: intents and
// verification; readmodel: refunds) use it, so they never disagree.
//
// Environment, validated at start:
//
//	BERTH_PAYMENT_PROVIDER          dev (default) or stripe
//	BERTH_STRIPE_API_KEY            with stripe: a secret (sk_…) or restricted (rk_…) key; required
//	BERTH_STRIPE_URL                with stripe: another API base URL (stripe-mock); default Stripe's
//	BERTH_STRIPE_WEBHOOK_SECRET     with stripe: the webhook endpoint's signing secret (whsec_…); serves
//	                                POST /v1/payments/stripe/webhook
//	BERTH_DEV_PAYMENTS              on/off (default off): serve POST /v1/dev/payments/{intent_id}/pay; only with dev
//	BERTH_DEV_PAYMENTS_WEBHOOK_URL  where that endpoint sends the signed webhook; default this service, in process
//	BERTH_DEV_INTENT_SECRET         with dev: the key the development provider's intents are signed with (≥ 32 bytes,
//	                                the same for every booking service of the deployment; ADR 0027); required by
//	                                the booking service (New), not by the read model's refunds (Refunds)
//
// The default is safe: the development provider without its pay endpoint
// can create intents but nothing can ever pay them, so no guest confirms
// without staff; a production deployment sets stripe (deploy/k8s).
package paymentprovider

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/stripepay"
)

// Provider is everything Berth asks of a payment provider.
type Provider interface {
	CreateIntent(ctx context.Context, req payments.IntentRequest) (payments.Intent, error)
	GetIntent(ctx context.Context, id string) (payments.Intent, error)
	payments.Provider
}

var (
	_ Provider = (*stripepay.Provider)(nil)
	_ Provider = (*postgres.DevPaymentProvider)(nil)
)

// Config is the provider's settings.
type Config struct {
	Kind         string // dev or stripe
	StripeAPIKey string
	StripeURL    string
	// StripeWebhookSecret signs Stripe's webhooks to this deployment.
	StripeWebhookSecret string
	DevPayments         bool
	DevWebhookURL       string
	// DevIntentSecret signs the development provider's intents: whoever
	// holds it can mint an intent and its client secret (ADR 0027).
	DevIntentSecret string
}

// Load reads and validates the settings, naming the variable in every error.
func Load() (Config, error) {
	var (
		c    Config
		errs config.Errors
		err  error
	)
	c.Kind = config.Env("BERTH_PAYMENT_PROVIDER", "dev")
	c.StripeAPIKey = config.Env("BERTH_STRIPE_API_KEY", "")
	c.StripeURL = config.Env("BERTH_STRIPE_URL", "")
	c.StripeWebhookSecret = config.Env("BERTH_STRIPE_WEBHOOK_SECRET", "")
	c.DevWebhookURL = config.Env("BERTH_DEV_PAYMENTS_WEBHOOK_URL", "")
	c.DevIntentSecret = config.Env("BERTH_DEV_INTENT_SECRET", "")
	c.DevPayments, err = onOff("BERTH_DEV_PAYMENTS")
	errs.Check(err)
	switch c.Kind {
	case "dev":
		if c.StripeAPIKey != "" {
			errs.Add("BERTH_STRIPE_API_KEY is set but BERTH_PAYMENT_PROVIDER is dev: set BERTH_PAYMENT_PROVIDER=stripe, or unset the key")
		}
		if c.StripeWebhookSecret != "" {
			errs.Add("BERTH_STRIPE_WEBHOOK_SECRET is set but BERTH_PAYMENT_PROVIDER is dev: set BERTH_PAYMENT_PROVIDER=stripe, or unset it")
		}
		if c.DevIntentSecret != "" && len(c.DevIntentSecret) < payments.MinDevIntentSecretLen {
			errs.Add("BERTH_DEV_INTENT_SECRET: at least %d bytes (e.g. openssl rand -hex 32)", payments.MinDevIntentSecretLen)
		}
	case "stripe":
		if !strings.HasPrefix(c.StripeAPIKey, "sk_") && !strings.HasPrefix(c.StripeAPIKey, "rk_") {
			errs.Add("BERTH_STRIPE_API_KEY: required with BERTH_PAYMENT_PROVIDER=stripe, a secret (sk_…) or restricted (rk_…) key")
		}
		if c.DevPayments {
			errs.Add("BERTH_DEV_PAYMENTS: the development pay endpoint exists only with BERTH_PAYMENT_PROVIDER=dev")
		}
		if c.DevIntentSecret != "" {
			errs.Add("BERTH_DEV_INTENT_SECRET is set but BERTH_PAYMENT_PROVIDER is stripe: unset it (it signs development intents only)")
		}
		if v := c.StripeWebhookSecret; v != "" && (!strings.HasPrefix(v, "whsec_") || len(v) < 16) {
			errs.Add("BERTH_STRIPE_WEBHOOK_SECRET: want the webhook endpoint's signing secret (whsec_…)")
		}
	default:
		errs.Add("BERTH_PAYMENT_PROVIDER=%q: want dev or stripe", c.Kind)
	}
	for name, v := range map[string]string{"BERTH_STRIPE_URL": c.StripeURL, "BERTH_DEV_PAYMENTS_WEBHOOK_URL": c.DevWebhookURL} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.Add("%s=%q: want an http(s) URL", name, v)
		}
	}
	return c, errs.Err()
}

func onOff(name string) (bool, error) {
	switch strings.ToLower(config.Env(name, "off")) {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: want on or off", name, config.Env(name, ""))
}

// RequireIntents reports what is missing for this service to create
// intents: with the development provider, the key they are signed with.
// There is no default: a key anyone could guess would let anyone mint an
// intent and its client secret, and so pay for any hold.
func (c Config) RequireIntents() error {
	if c.Kind != "stripe" && c.DevIntentSecret == "" {
		return fmt.Errorf("BERTH_DEV_INTENT_SECRET: required with the development payment provider (BERTH_PAYMENT_PROVIDER=dev, the default): "+
			"at least %d random bytes, the same for every booking service of the deployment (make deps writes one to .local/env)", payments.MinDevIntentSecretLen)
	}
	return nil
}

// New builds the configured provider, everything a booking service asks of
// it. The development provider keeps what happens to its intents in db; it
// is also returned (nil with Stripe) for the pay endpoint.
func (c Config) New(db *postgres.DB) (Provider, *postgres.DevPaymentProvider, error) {
	if c.Kind == "stripe" {
		p, err := stripepay.New(stripepay.Config{APIKey: c.StripeAPIKey, URL: c.StripeURL})
		return p, nil, err
	}
	if err := c.RequireIntents(); err != nil {
		return nil, nil, err
	}
	dev, err := postgres.NewDevPaymentProvider(db, c.DevIntentSecret)
	if err != nil {
		return nil, nil, fmt.Errorf("BERTH_DEV_INTENT_SECRET: %w", err)
	}
	return dev, dev, nil
}

// Refunds builds the provider as the refunds consumer needs it (the read
// model): the development provider's refunds need no intent key.
func (c Config) Refunds(db *postgres.DB) (payments.Provider, error) {
	if c.Kind == "stripe" {
		return stripepay.New(stripepay.Config{APIKey: c.StripeAPIKey, URL: c.StripeURL})
	}
	return postgres.NewDevRefunds(db), nil
}
