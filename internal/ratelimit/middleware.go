package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/clientip"
	"github.com/berthhq/berth/internal/httpapi"
)

// Identity is who a request comes from, as far as the edge can tell.
type Identity struct {
	// Client keys per-client budgets: "sub:<token subject>", "key:<hash of
	// a valid API key>" or "ip:<address>" (an IPv6 client by its /64).
	Client string
	// Guest is the verified token subject, "" without a valid token.
	Guest string
}

// Identifier tells clients apart. Only proven identities count: a bearer
// token is used only when it verifies, an API key only when APIKey accepts
// it; anything else is keyed by the remote address, so inventing a fresh
// token or key per request buys no fresh budget.
type Identifier struct {
	// Tokens verifies bearer tokens; nil ignores them.
	Tokens *auth.Tokens
	// APIKey reports whether a partner key is valid; nil ignores keys.
	APIKey func(string) bool
	// Proxies are the trusted proxies whose X-Forwarded-For is believed
	// (BERTH_TRUSTED_PROXIES); the zero value keys clients by the peer.
	Proxies clientip.Proxies
}

// Identify returns the identity of r.
func (id Identifier) Identify(r *http.Request) Identity {
	if id.Tokens != nil {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if p, err := id.Tokens.Verify(strings.TrimSpace(tok)); err == nil {
				return Identity{Client: "sub:" + p.Subject, Guest: p.Subject}
			}
		}
	}
	if id.APIKey != nil {
		if key := r.Header.Get("X-API-Key"); key != "" && id.APIKey(key) {
			sum := sha256.Sum256([]byte(key))
			return Identity{Client: "key:" + hex.EncodeToString(sum[:12])}
		}
	}
	return Identity{Client: "ip:" + addrKey(id.Proxies.Client(r), r.RemoteAddr)}
}

// RemoteIP is the connection's address; an IPv6 address is cut to its /64,
// the block one subscriber usually holds.
func RemoteIP(r *http.Request) string {
	return addrKey(clientip.Peer(r), r.RemoteAddr)
}

// addrKey keys a client address, an IPv6 one by its /64; raw stands in
// when the address is unknown.
func addrKey(a netip.Addr, raw string) string {
	if !a.IsValid() {
		return raw
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// Classify returns the budgets a request spends under rules.
//
//   - reads (GET, HEAD, OPTIONS): client_reads per client;
//   - every write: client_writes per client;
//   - writes under /v1/hotels/{id}/… or /v1/clinics/{id}/…: hotel_writes or
//     clinic_writes per partition — except the waiting room, which the
//     router serves from Redis and which must not spend the clinic's
//     booking budget at the very moment it opens;
//   - holds (POST …/reservations, POST …/appointments): guest_holds per
//     guest (the client identity without a verified token).
//
// /healthz, /readyz and /metrics are never limited.
func Classify(rules Rules, method, path string, who Identity) []Check {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return nil
	}
	var checks []Check
	add := func(scope, id string) {
		if lim, ok := rules[scope]; ok && id != "" {
			checks = append(checks, Check{Scope: scope, ID: id, Limit: lim})
		}
	}
	if method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions {
		add(ScopeClientReads, who.Client)
		return checks
	}
	add(ScopeClientWrites, who.Client)
	kind, id, rest := httpapi.PartitionPath(path)
	if kind == "" || rest == "" || strings.HasPrefix(rest, "waiting-room/") || rest == "waiting-room" {
		return checks
	}
	if kind == berth.KindHotel {
		add(ScopeHotelWrites, id)
	} else {
		add(ScopeClinicWrites, id)
	}
	rest = strings.TrimSuffix(rest, "/")
	if method == http.MethodPost && (kind == berth.KindHotel && rest == "reservations" || kind == berth.KindClinic && rest == "appointments") {
		guest := who.Guest
		if guest == "" {
			guest = who.Client
		}
		add(ScopeGuestHolds, guest)
	}
	return checks
}

// Middleware answers 429 rate_limited (problem+json, Retry-After in whole
// seconds) when a request's budgets are spent, and passes it on otherwise.
type Middleware struct {
	Limiter  *Limiter
	Rules    Rules
	Identify func(*http.Request) Identity
	Logger   *slog.Logger
}

// Wrap returns next behind the limits.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	identify := m.Identify
	if identify == nil {
		identify = Identifier{}.Identify
	}
	if len(m.Rules) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks := Classify(m.Rules, r.Method, r.URL.Path, identify(r))
		if len(checks) > 0 {
			if d := m.Limiter.Allow(r.Context(), checks...); !d.Allowed {
				httpapi.WriteProblem(w, r, m.Logger, &berth.Error{
					Code: berth.CodeRateLimited, Detail: "too many requests; retry after the time in Retry-After",
					RetryAfter: d.RetryAfterSeconds(),
				})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
