package waitingroom

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Tokens are "<kid>.<payload>.<mac>": payload is base64url (no padding) of a
// small JSON document, mac is base64url of HMAC-SHA256(key[kid],
// "<kid>.<payload>"). Two kinds share the format and are told apart by
// "typ", so a ticket is never accepted as an access token or the reverse.
const (
	typTicket = "ticket"
	typAccess = "access"
	// maxTokenLen bounds what is parsed at all.
	maxTokenLen = 1024
	// minKeyBytes: HMAC-SHA256 wants a 256-bit key.
	minKeyBytes = 32
)

// Errors of Verify; the HTTP edge maps them to 400 and 401.
var (
	ErrMalformed = errors.New("malformed token")
	ErrInvalid   = errors.New("invalid token")
)

// claims is what a token carries.
type claims struct {
	Typ      string `json:"typ"`
	ClinicID string `json:"cid"`
	TicketID string `json:"tid"`
	// Subject is the verified token subject (the guest) who joined; an
	// access token admits holds of that guest only. "" for a ticket taken
	// without a verified token: its access token admits nobody.
	Subject  string `json:"sub,omitempty"`
	Window   string `json:"win"` // the window's local date
	IssuedAt int64  `json:"iat"` // unix ms
	Expires  int64  `json:"exp"` // unix ms
}

// Keyring signs with its newest key and verifies with every key, so keys
// rotate without invalidating tickets in flight: add the new key first,
// drop the old one after the longest window has ended.
type Keyring struct {
	ids  []string // newest first
	keys map[string][]byte
}

var kidPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ParseKeys reads "kid:hexsecret,kid:hexsecret", newest (signing) key
// first. Secrets are at least 32 bytes. Errors name the variable (name)
// but never a secret.
func ParseKeys(name, v string) (*Keyring, error) {
	kr := &Keyring{keys: map[string][]byte{}}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		kid, secret, ok := strings.Cut(part, ":")
		if !ok || !kidPattern.MatchString(kid) {
			return nil, fmt.Errorf("%s: want kid:hexsecret,… with kid of letters, digits, _ or -", name)
		}
		key, err := hex.DecodeString(secret)
		if err != nil || len(key) < minKeyBytes {
			return nil, fmt.Errorf("%s: key %q: want at least %d bytes of hex", name, kid, minKeyBytes)
		}
		if _, dup := kr.keys[kid]; dup {
			return nil, fmt.Errorf("%s: key id %q given twice", name, kid)
		}
		kr.ids = append(kr.ids, kid)
		kr.keys[kid] = key
	}
	if len(kr.ids) == 0 {
		return nil, fmt.Errorf("%s: at least one key is required", name)
	}
	return kr, nil
}

// SigningKeyID is the id of the key that signs.
func (kr *Keyring) SigningKeyID() string { return kr.ids[0] }

func (kr *Keyring) sign(c claims) string {
	kid := kr.ids[0]
	payload, _ := json.Marshal(c) // only strings and integers: cannot fail
	head := kid + "." + base64.RawURLEncoding.EncodeToString(payload)
	return head + "." + base64.RawURLEncoding.EncodeToString(mac(kr.keys[kid], head))
}

func mac(key []byte, head string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(head))
	return m.Sum(nil)
}

// verify checks a token strictly: shape, known key id, MAC (constant-time
// compare), strict JSON, kind, clinic and expiry. The MAC is checked before
// the payload is parsed, so nothing an attacker wrote is decoded unless it
// was signed by us.
func (kr *Keyring) verify(tok, typ, clinicID string, now time.Time) (claims, error) {
	var c claims
	if len(tok) == 0 || len(tok) > maxTokenLen {
		return c, fmt.Errorf("%w: empty or too long", ErrMalformed)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return c, fmt.Errorf("%w: want kid.payload.mac", ErrMalformed)
	}
	kid, payloadB64, macB64 := parts[0], parts[1], parts[2]
	payload, err1 := base64.RawURLEncoding.Strict().DecodeString(payloadB64)
	sig, err2 := base64.RawURLEncoding.Strict().DecodeString(macB64)
	if err1 != nil || err2 != nil || len(sig) != sha256.Size {
		return c, fmt.Errorf("%w: bad encoding", ErrMalformed)
	}
	key, ok := kr.keys[kid]
	if !ok {
		return c, fmt.Errorf("%w: unknown key id", ErrInvalid)
	}
	if !hmac.Equal(sig, mac(key, kid+"."+payloadB64)) {
		return c, fmt.Errorf("%w: bad signature", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: bad payload", ErrInvalid)
	}
	switch {
	case c.Typ != typ:
		return c, fmt.Errorf("%w: a %s token, not a %s", ErrInvalid, c.Typ, typ)
	case c.ClinicID != clinicID:
		return c, fmt.Errorf("%w: for another clinic", ErrInvalid)
	case c.TicketID == "" || c.Window == "":
		return c, fmt.Errorf("%w: missing claims", ErrInvalid)
	case now.UnixMilli() >= c.Expires:
		return c, fmt.Errorf("%w: expired", ErrInvalid)
	case c.IssuedAt > now.Add(time.Minute).UnixMilli():
		return c, fmt.Errorf("%w: issued in the future", ErrInvalid)
	}
	return c, nil
}
