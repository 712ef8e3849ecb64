package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/berthhq/berth/internal/berth"
)

// MaxIdempotencyKeyLen is the longest Idempotency-Key accepted.
const MaxIdempotencyKeyLen = 64

// IdempotencyKey returns the request's Idempotency-Key, or an error when it
// is missing (idempotency_key_required) or malformed (invalid_request).
func IdempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 || vals[0] == "" {
		return "", berth.Errorf(berth.CodeIdempotencyKeyRequired, "this request needs an Idempotency-Key header")
	}
	if len(vals) > 1 {
		return "", berth.Invalid(berth.FieldError{Field: "Idempotency-Key", Message: "send the header once"})
	}
	if err := ValidIdempotencyKey(vals[0]); err != nil {
		return "", err
	}
	return vals[0], nil
}

// ValidIdempotencyKey checks a key: 1–64 visible ASCII characters.
func ValidIdempotencyKey(k string) error {
	if len(k) == 0 || len(k) > MaxIdempotencyKeyLen {
		return berth.Invalid(berth.FieldError{Field: "Idempotency-Key", Message: "want 1 to 64 characters"})
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return berth.Invalid(berth.FieldError{Field: "Idempotency-Key", Message: "want visible ASCII characters only"})
		}
	}
	return nil
}

// RequestHash fingerprints a write for its Idempotency-Key: the route, the
// caller and the decoded request, re-encoded so that key order and spacing
// of the client's JSON do not matter.
func RequestHash(route, subject string, req any) string {
	body, _ := json.Marshal(req)
	return requestHash(route, subject, body)
}
