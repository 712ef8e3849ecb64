// Package auth issues and verifies Berth's bearer tokens: HS256 JWTs with
// the claims sub, role, exp, iat and, for staff, partitions. Only HS256 is
// accepted (never "none", never another algorithm); exp is required and,
// like iat and nbf, must be a JSON number; iat and nbf may not lie in the
// future beyond Leeway; and no token lives longer than a configured maximum
// (BERTH_TOKEN_MAX_TTL), so a leaked token is worth little for long. The
// secret comes from the environment (BERTH_TOKEN_SECRET).
package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/golang-jwt/jwt/v5"
)

// MinSecretLen is the shortest secret accepted: HS256 wants 256 bits.
const MinSecretLen = 32

// Leeway is the clock skew tolerated between the minting and the verifying
// machine, for exp, iat and nbf alike.
const Leeway = 30 * time.Second

// DefaultMaxLifetime is the longest a token may live unless configured.
const DefaultMaxLifetime = 24 * time.Hour

// Tokens mints and verifies tokens with one shared secret.
type Tokens struct {
	secret      []byte
	now         func() time.Time
	maxLifetime time.Duration
	macs        macs // keyed HMAC states for verifyFast
}

// Option configures Tokens.
type Option func(*Tokens)

// WithMaxLifetime sets the longest lifetime (exp − iat) a token may have;
// Mint refuses longer ones and Verify rejects them. Zero keeps
// DefaultMaxLifetime.
func WithMaxLifetime(d time.Duration) Option {
	return func(t *Tokens) {
		if d != 0 {
			t.maxLifetime = d
		}
	}
}

// New returns Tokens for secret, which must be at least MinSecretLen bytes.
func New(secret string, opts ...Option) (*Tokens, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("token secret must be at least %d bytes", MinSecretLen)
	}
	t := &Tokens{secret: []byte(secret), now: time.Now, maxLifetime: DefaultMaxLifetime, macs: macs{pool: make(chan hash.Hash, 64)}}
	for _, o := range opts {
		o(t)
	}
	if t.maxLifetime < time.Minute {
		return nil, fmt.Errorf("token maximum lifetime %s: want at least 1m", t.maxLifetime)
	}
	return t, nil
}

// MaxLifetime returns the longest lifetime a token may have.
func (t *Tokens) MaxLifetime() time.Duration { return t.maxLifetime }

// MaxLifetimeEnvVar names the longest token lifetime; every binary that
// mints or verifies tokens reads the same variable, so they agree.
const MaxLifetimeEnvVar = "BERTH_TOKEN_MAX_TTL"

// ParseMaxLifetime parses the value of BERTH_TOKEN_MAX_TTL ("" is
// DefaultMaxLifetime), which must lie between 1m and 30 days. The binary
// reads the environment and hands the value here.
func ParseMaxLifetime(v string) (time.Duration, error) {
	if v == "" {
		return DefaultMaxLifetime, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a duration such as 24h", MaxLifetimeEnvVar, v)
	}
	if d < time.Minute || d > 30*24*time.Hour {
		return 0, fmt.Errorf("%s=%s: want 1m to 720h", MaxLifetimeEnvVar, d)
	}
	return d, nil
}

type claims struct {
	Role       berth.Role `json:"role"`
	Partitions []string   `json:"partitions,omitempty"`
	jwt.RegisteredClaims
}

// UnmarshalJSON refuses exp, iat and nbf that are not JSON numbers. The jwt
// library reads "exp":"9999999999" as a date too; RFC 7519 says NumericDate
// is a number, and a token that bends the format is not one of ours.
func (c *claims) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	for _, name := range []string{"exp", "iat", "nbf"} {
		if v, ok := raw[name]; ok && !isJSONNumber(v) {
			return fmt.Errorf("claim %s is not a number", name)
		}
	}
	type plain claims // without this method
	return json.Unmarshal(b, (*plain)(c))
}

func isJSONNumber(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
}

// Mint returns a signed token for p, valid for ttl (more than zero, at most
// the maximum lifetime).
func (t *Tokens) Mint(p berth.Principal, ttl time.Duration) (string, error) {
	if !p.Role.Valid() {
		return "", fmt.Errorf("unknown role %q", p.Role)
	}
	if p.Subject == "" {
		return "", errors.New("a token needs a subject")
	}
	if ttl <= 0 || ttl > t.maxLifetime {
		return "", fmt.Errorf("token lifetime %s: want more than 0 and at most %s (BERTH_TOKEN_MAX_TTL)", ttl, t.maxLifetime)
	}
	return t.mintFast(p, t.now(), ttl), nil
}

// mintLibrary is what Mint writes, through the jwt library: the reference
// mint_fast.go's hand-written tokens are held to, byte for byte
// (TestMintWritesWhatTheLibraryWrites, FuzzMint).
func (t *Tokens) mintLibrary(p berth.Principal, now time.Time, ttl time.Duration) (string, error) {
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

// Verify checks a token's signature, algorithm, expiry and claims. The
// tokens Mint issues are read by hand (verify_fast.go); the library decides
// every other token and every refusal.
func (t *Tokens) Verify(token string) (berth.Principal, error) {
	if len(token) > 8192 {
		return berth.Principal{}, fmt.Errorf("%w: too long", ErrInvalidToken)
	}
	if p, ok := t.verifyFast(token); ok {
		return p, nil
	}
	return t.verifySlow(token)
}

// verifySlow is Verify through the jwt library.
func (t *Tokens) verifySlow(token string) (berth.Principal, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return t.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(), // an iat in the future (beyond the leeway) is refused
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(t.now),
	)
	if err != nil {
		return berth.Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	// The lifetime counts from iat, or from now for a token without one, so
	// neither an old iat nor a missing one buys a longer life.
	from := t.now()
	if c.IssuedAt != nil {
		from = c.IssuedAt.Time
	}
	if c.ExpiresAt.Sub(from) > t.maxLifetime {
		return berth.Principal{}, fmt.Errorf("%w: lifetime beyond the maximum of %s", ErrInvalidToken, t.maxLifetime)
	}
	if c.Subject == "" || !c.Role.Valid() {
		return berth.Principal{}, fmt.Errorf("%w: missing subject or unknown role", ErrInvalidToken)
	}
	return berth.Principal{Subject: c.Subject, Role: c.Role, Partitions: c.Partitions}, nil
}
