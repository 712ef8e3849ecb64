package paymentprovider

import (
	"strings"
	"testing"
)

// The settings are validated at start and every error names its variable;
// the defaults are safe (the development provider without its pay endpoint).
func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // "" = valid; else a substring of the error
	}{
		{"defaults", nil, ""},
		{"dev with its pay endpoint", map[string]string{"BERTH_DEV_PAYMENTS": "on", "BERTH_DEV_PAYMENTS_WEBHOOK_URL": "http://127.0.0.1:8080/v1/payments/webhook"}, ""},
		{"stripe", map[string]string{"BERTH_PAYMENT_PROVIDER": "stripe", "BERTH_STRIPE_API_KEY": "sk_test_x", "BERTH_STRIPE_URL": "http://127.0.0.1:12111"}, ""},
		{"stripe without a key", map[string]string{"BERTH_PAYMENT_PROVIDER": "stripe"}, "BERTH_STRIPE_API_KEY"},
		{"stripe with a publishable key", map[string]string{"BERTH_PAYMENT_PROVIDER": "stripe", "BERTH_STRIPE_API_KEY": "pk_live_x"}, "BERTH_STRIPE_API_KEY"},
		{"stripe with the dev pay endpoint", map[string]string{"BERTH_PAYMENT_PROVIDER": "stripe", "BERTH_STRIPE_API_KEY": "sk_live_x", "BERTH_DEV_PAYMENTS": "on"}, "BERTH_DEV_PAYMENTS"},
		{"a key without stripe", map[string]string{"BERTH_STRIPE_API_KEY": "sk_live_x"}, "BERTH_STRIPE_API_KEY"},
		{"unknown provider", map[string]string{"BERTH_PAYMENT_PROVIDER": "paypal"}, "BERTH_PAYMENT_PROVIDER"},
		{"bad switch", map[string]string{"BERTH_DEV_PAYMENTS": "maybe"}, "BERTH_DEV_PAYMENTS"},
		{"bad URL", map[string]string{"BERTH_PAYMENT_PROVIDER": "stripe", "BERTH_STRIPE_API_KEY": "sk_test_x", "BERTH_STRIPE_URL": "stripe-mock:12111"}, "BERTH_STRIPE_URL"},
		{"bad webhook URL", map[string]string{"BERTH_DEV_PAYMENTS_WEBHOOK_URL": "ftp://x"}, "BERTH_DEV_PAYMENTS_WEBHOOK_URL"},
		{"stripe with its webhook", map[string]string{"BERTH_PAYMENT_PROVIDER": "stripe", "BERTH_STRIPE_API_KEY": "sk_test_x", "BERTH_STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdef"}, ""},
		{"stripe webhook secret that is not one", map[string]string{"BERTH_PAYMENT_PROVIDER": "stripe", "BERTH_STRIPE_API_KEY": "sk_test_x", "BERTH_STRIPE_WEBHOOK_SECRET": "sk_test_x"}, "BERTH_STRIPE_WEBHOOK_SECRET"},
		{"dev with its intent key", map[string]string{"BERTH_DEV_INTENT_SECRET": strings.Repeat("k", 32)}, ""},
		{"dev with a short intent key", map[string]string{"BERTH_DEV_INTENT_SECRET": "guessable"}, "BERTH_DEV_INTENT_SECRET"},
		{"stripe with a dev intent key", map[string]string{"BERTH_PAYMENT_PROVIDER": "stripe", "BERTH_STRIPE_API_KEY": "sk_test_x", "BERTH_DEV_INTENT_SECRET": strings.Repeat("k", 32)}, "BERTH_DEV_INTENT_SECRET"},
		{"stripe webhook secret without stripe", map[string]string{"BERTH_STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdef"}, "BERTH_STRIPE_WEBHOOK_SECRET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"BERTH_PAYMENT_PROVIDER", "BERTH_STRIPE_API_KEY", "BERTH_STRIPE_URL", "BERTH_DEV_PAYMENTS", "BERTH_DEV_PAYMENTS_WEBHOOK_URL", "BERTH_STRIPE_WEBHOOK_SECRET", "BERTH_DEV_INTENT_SECRET"} {
				t.Setenv(k, tc.env[k])
			}
			c, err := Load()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
			if tc.name == "defaults" && (c.Kind != "dev" || c.DevPayments) {
				t.Fatalf("defaults %+v: want dev without the pay endpoint", c)
			}
		})
	}
}

// A booking service with the development provider needs the key its
// intents are signed with; there is no default to fall back to. Stripe
// needs none, and neither do the read model's refunds.
func TestRequireIntents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    Config
		want bool // an error
	}{
		{Config{Kind: "dev"}, true},
		{Config{}, true},
		{Config{Kind: "dev", DevIntentSecret: strings.Repeat("k", 32)}, false},
		{Config{Kind: "stripe", StripeAPIKey: "sk_test_x"}, false},
	} {
		err := tc.c.RequireIntents()
		if (err != nil) != tc.want || (err != nil && !strings.Contains(err.Error(), "BERTH_DEV_INTENT_SECRET")) {
			t.Errorf("%+v: %v", tc.c, err)
		}
		if tc.want {
			if _, _, err := tc.c.New(nil); err == nil || !strings.Contains(err.Error(), "BERTH_DEV_INTENT_SECRET") {
				t.Errorf("%+v: New = %v; want it refused, naming BERTH_DEV_INTENT_SECRET", tc.c, err)
			}
			if _, err := tc.c.Refunds(nil); err != nil {
				t.Errorf("%+v: refunds refused: %v", tc.c, err)
			}
		}
	}
}
