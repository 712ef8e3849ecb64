// Package auth issues and verifies Berth's bearer tokens: HS256 JWTs with
// the claims sub, role, exp and, for staff, partitions. Only HS256 is
// accepted (never "none", never another algorithm), exp is required, and the
// secret comes from the environment (BERTH_TOKEN_SECRET).
package auth

import (
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/golang-jwt/jwt/v5"
)

// MinSecretLen is the shortest secret accepted: HS256 wants 256 bits.
const MinSecretLen = 32

// Tokens mints and verifies tokens with one shared secret.
type Tokens struct {
	secret []byte
	now    func() time.Time
}

// New returns Tokens for secret, which must be at least MinSecretLen bytes.
func New(secret string) (*Tokens, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("token secret must be at least %d bytes", MinSecretLen)
	}
	return &Tokens{secret: []byte(secret), now: time.Now}, nil
}

type claims struct {
	Role       berth.Role `json:"role"`
	Partitions []string   `json:"partitions,omitempty"`
	jwt.RegisteredClaims
}

// Mint returns a signed token for p, valid for ttl.
func (t *Tokens) Mint(p berth.Principal, ttl time.Duration) (string, error) {
	if !p.Role.Valid() {
		return "", fmt.Errorf("unknown role %q", p.Role)
	}
	if p.Subject == "" {
		return "", errors.New("a token needs a subject")
	}
	now := t.now()
	c := claims{Role: p.Role, Partitions: p.Partitions, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   p.Subject,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(t.secret)
}

// ErrInvalidToken is returned for every token that does not verify; the
// cause is wrapped for logs, never shown to clients.
var ErrInvalidToken = errors.New("invalid token")

// Verify checks a token's signature, algorithm, expiry and claims.
func (t *Tokens) Verify(token string) (berth.Principal, error) {
	if len(token) > 8192 {
		return berth.Principal{}, fmt.Errorf("%w: too long", ErrInvalidToken)
	}
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return t.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(30*time.Second),
		jwt.WithTimeFunc(t.now),
	)
	if err != nil {
		return berth.Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if c.Subject == "" || !c.Role.Valid() {
		return berth.Principal{}, fmt.Errorf("%w: missing subject or unknown role", ErrInvalidToken)
	}
	return berth.Principal{Subject: c.Subject, Role: c.Role, Partitions: c.Partitions}, nil
}
