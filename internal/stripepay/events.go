package stripepay

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
)

// WebhookTolerance is how old a Stripe-Signature timestamp may be: Stripe's
// own default, the same five minutes as Berth's webhook.
const WebhookTolerance = 5 * time.Minute

// Events verifies the webhooks Stripe signs for one endpoint
// (Stripe-Signature: t=…,v1=HMAC-SHA256 of "<t>.<raw body>" with the
// endpoint's whsec_ secret), with stripe-go's own webhook.ConstructEvent.
type Events struct {
	secret string
}

// NewEvents returns a verifier for the endpoint secret (whsec_…).
func NewEvents(secret string) (*Events, error) {
	if !strings.HasPrefix(secret, "whsec_") || len(secret) < 16 {
		return nil, errors.New("stripe: want the webhook endpoint's signing secret (whsec_…)")
	}
	return &Events{secret: secret}, nil
}

// ErrBadSignature is a body whose Stripe-Signature is missing, wrong or
// stale.
var ErrBadSignature = errors.New("stripe: webhook signature missing, invalid or stale")

// Verify checks the signature over the raw body and returns the event's id,
// its type and the id of the object it is about (data.object.id: a
// PaymentIntent for payment_intent.* events). Nothing else of the event is
// believed: its object is a snapshot, and the caller asks Stripe for the
// object itself. The API version of the event is not checked, since only
// these three fields are read and they are the same in every version.
func (e *Events) Verify(raw []byte, signature string) (id, typ, objectID string, err error) {
	ev, err := webhook.ConstructEventWithOptions(raw, signature, e.secret,
		webhook.ConstructEventOptions{Tolerance: WebhookTolerance, IgnoreAPIVersionMismatch: true})
	if err != nil {
		if errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrInvalidHeader) ||
			errors.Is(err, webhook.ErrNoValidSignature) || errors.Is(err, webhook.ErrTooOld) {
			return "", "", "", fmt.Errorf("%w: %v", ErrBadSignature, err)
		}
		return "", "", "", fmt.Errorf("stripe: webhook body: %w", err)
	}
	var obj struct {
		ID string `json:"id"`
	}
	if ev.Data != nil && len(ev.Data.Raw) > 0 {
		if err := json.Unmarshal(ev.Data.Raw, &obj); err != nil {
			return "", "", "", fmt.Errorf("stripe: webhook data.object: %w", err)
		}
	}
	return ev.ID, string(ev.Type), obj.ID, nil
}
