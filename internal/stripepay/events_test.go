package stripepay_test

import (
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/stripepay"
	"github.com/stripe/stripe-go/v82/webhook"
)

// Events believes a body only with a fresh signature of its own secret,
// and reads no more of it than the event id, its type and its object's id.
func TestEventsVerify(t *testing.T) {
	t.Parallel()
	const secret = "whsec_berth_events_test_secret"
	ev, err := stripepay.NewEvents(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded","api_version":"2019-01-01",` +
		`"data":{"object":{"id":"pi_1","object":"payment_intent","amount":1}}}`)
	sign := func(b []byte, s string, at time.Time) string {
		return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: b, Secret: s, Timestamp: at}).Header
	}
	id, typ, obj, err := ev.Verify(body, sign(body, secret, time.Now()))
	if err != nil || id != "evt_1" || typ != "payment_intent.succeeded" || obj != "pi_1" {
		t.Fatalf("a good event (an old API version): %q %q %q %v", id, typ, obj, err)
	}
	altered := append([]byte(nil), body...)
	altered[len(altered)-4] = '2' // the amount
	for name, tc := range map[string]struct {
		body []byte
		sig  string
	}{
		"another secret":    {body, sign(body, "whsec_another_secret_entirely", time.Now())},
		"altered body":      {altered, sign(body, secret, time.Now())},
		"ten minutes old":   {body, sign(body, secret, time.Now().Add(-10*time.Minute))},
		"no signature":      {body, ""},
		"garbage signature": {body, "v1=zz"},
	} {
		if _, _, _, err := ev.Verify(tc.body, tc.sig); !errors.Is(err, stripepay.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
	for _, bad := range []string{"", "sk_test_123", "whsec_"} {
		if _, err := stripepay.NewEvents(bad); err == nil {
			t.Errorf("NewEvents(%q) accepted", bad)
		}
	}
}
